"""Data: datasets, the prefetching DataLoader, ImageFolder, transforms, packed and synthetic data."""
from tinyflow.data import synthetic, transforms
from tinyflow.data.dataset import (
    ConcatDataset,
    Dataset,
    IterableDataset,
    SkippedSample,
    Subset,
    TensorDataset,
    random_split,
)
from tinyflow.data.folder import EmptyClassWarning, EmptyDatasetError, ImageFolder, find_classes, load_image
from tinyflow.data.loader import (
    DataLoader,
    DataLoaderWorkerError,
    SkippedSampleWarning,
    WorkerInfo,
    default_collate,
    get_worker_info,
)
from tinyflow.data.packed import PackedDataError, PackedDataset, is_packed, pack_folder
from tinyflow.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "synthetic", "transforms", "Dataset", "SkippedSample", "Subset", "TensorDataset", "random_split",
    "EmptyClassWarning", "EmptyDatasetError", "ImageFolder", "find_classes", "load_image",
    "DataLoader", "DataLoaderWorkerError", "SkippedSampleWarning", "WorkerInfo", "default_collate", "get_worker_info",
    "PackedDataError", "PackedDataset", "is_packed", "pack_folder", "RandomSampler", "Sampler", "SequentialSampler",
    "ConcatDataset", "IterableDataset", "BatchSampler", "SubsetRandomSampler", "WeightedRandomSampler",
]
# Other modules of data/ (text.py, distributed.py) add their export lines below.
from tinyflow.data.distributed import DistributedSampler  # noqa: E402

__all__ += ["DistributedSampler"]
