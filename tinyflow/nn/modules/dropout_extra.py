"""The rest of PyTorch's dropout layers: Dropout1d/2d/3d (whole channels), AlphaDropout and
FeatureAlphaDropout (for SELU networks): the PyTorch surface. Dropout is in dropout.py."""
from __future__ import annotations

from tinyflow.nn import functional as F
from tinyflow.nn.modules.dropout import _DropoutNd
from tinyflow.tensor import Tensor

__all__ = ["Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class Dropout1d(_DropoutNd):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.dropout1d(input, self.p, self.training)


class Dropout2d(_DropoutNd):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.dropout2d(input, self.p, self.training)


class Dropout3d(_DropoutNd):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.dropout3d(input, self.p, self.training)


class AlphaDropout(_DropoutNd):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.feature_alpha_dropout(input, self.p, self.training)
