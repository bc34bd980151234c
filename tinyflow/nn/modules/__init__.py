"""``torch.nn.modules``: the import paths PyTorch programs use for layer classes
(``torch.nn.modules.conv.Conv2d``, ``torch.nn.modules.loss.CrossEntropyLoss``,
``torch.nn.modules.module.Module``, ...). Each submodule re-exports the tinyflow.nn file of the
same name, so the classes are the very ones of ``tinyflow.nn``."""
from tinyflow.nn.modules import (  # noqa: F401
    activation,
    batchnorm,
    channelshuffle,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    linear,
    loss,
    module,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsampling,
)
from tinyflow.nn.modules.activation import *  # noqa: F401,F403
from tinyflow.nn.modules.batchnorm import *  # noqa: F401,F403
from tinyflow.nn.modules.container import *  # noqa: F401,F403
from tinyflow.nn.modules.conv import *  # noqa: F401,F403
from tinyflow.nn.modules.distance import *  # noqa: F401,F403
from tinyflow.nn.modules.dropout import *  # noqa: F401,F403
from tinyflow.nn.modules.flatten import *  # noqa: F401,F403
from tinyflow.nn.modules.fold import *  # noqa: F401,F403
from tinyflow.nn.modules.instancenorm import *  # noqa: F401,F403
from tinyflow.nn.modules.linear import *  # noqa: F401,F403
from tinyflow.nn.modules.loss import *  # noqa: F401,F403
from tinyflow.nn.modules.module import *  # noqa: F401,F403
from tinyflow.nn.modules.normalization import *  # noqa: F401,F403
from tinyflow.nn.modules.padding import *  # noqa: F401,F403
from tinyflow.nn.modules.pixelshuffle import *  # noqa: F401,F403
from tinyflow.nn.modules.pooling import *  # noqa: F401,F403
from tinyflow.nn.modules.rnn import *  # noqa: F401,F403
from tinyflow.nn.modules.sparse import *  # noqa: F401,F403
from tinyflow.nn.modules.transformer import *  # noqa: F401,F403
from tinyflow.nn.modules.upsampling import *  # noqa: F401,F403
