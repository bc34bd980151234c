"""Real PyTorch programs with only the imports changed: pytorch/examples' MNIST CNN (Adadelta,
StepLR, nll_loss, dropout), its DCGAN (weights_init through .data and nn.init, ConvTranspose2d,
BatchNorm2d, LeakyReLU, BCELoss, label.fill_), torchvision's residual BasicBlock (out += identity),
and a small segmentation net (Upsample, reflection padding, group norm, BCEWithLogits) that runs
against torch from the same weights. Each program is one source text, executed once with
``import torch`` bound to tinyflow."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import tinyflow

torch = pytest.importorskip("torch")


def run(source: str, lib: str, **env) -> dict:
    """Execute ``source`` with torch / nn / F / optim bound to tinyflow's or torch's modules."""
    if lib == "tinyflow":
        import tinyflow.nn as nn
        import tinyflow.nn.functional as F
        import tinyflow.optim as optim
        from tinyflow.optim.lr_scheduler import StepLR
        mods = dict(torch=tinyflow, nn=nn, F=F, optim=optim, StepLR=StepLR)
    else:
        mods = dict(torch=torch, nn=torch.nn, F=torch.nn.functional, optim=torch.optim,
                    StepLR=torch.optim.lr_scheduler.StepLR)
    scope = dict(mods, np=np, **env)
    exec(compile(textwrap.dedent(source), f"<{lib} program>", "exec"), scope)  # noqa: S102
    return scope


MNIST = """
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(model, device, batches, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(batches):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())


def test(model, device, batches):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in batches:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    return test_loss / 16, correct


use_cuda = torch.cuda.is_available()
torch.manual_seed(1)
device = torch.device("cuda" if use_cuda else "cpu")
batches = [(torch.tensor(images[i:i + 4]), torch.tensor(labels[i:i + 4])) for i in range(0, 16, 4)]
model = Net().to(device)
optimizer = optim.Adadelta(model.parameters(), lr=1.0)
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
losses = []
for epoch in range(1, 4):
    train(model, device, batches, optimizer, epoch)
    scheduler.step()
test_loss, correct = test(model, device, batches)
"""


def test_the_mnist_example_runs_and_learns():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 16)
    images = (rng.standard_normal((16, 1, 28, 28)) * 0.1 + labels[:, None, None, None] / 10).astype(np.float32)
    scope = run(MNIST, "tinyflow", images=images, labels=labels)
    assert len(scope["losses"]) == 12 and np.isfinite(scope["losses"]).all()
    assert np.mean(scope["losses"][-4:]) < np.mean(scope["losses"][:4])
    assert scope["optimizer"].param_groups[0]["lr"] == pytest.approx(0.7**3)
    assert 0 <= scope["correct"] <= 16 and np.isfinite(scope["test_loss"])


DCGAN = """
nz, ngf, ndf, nc = 8, 4, 4, 3


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


def weights_init_data(m):  # the older form of the same, through .data
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


class Generator(nn.Module):
    def __init__(self, ngpu):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh()
        )

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)
        return output


class Discriminator(nn.Module):
    def __init__(self, ngpu):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


device = torch.device("cpu")
netG = Generator(1).to(device)
netG.apply(weights_init)
netD = Discriminator(1).to(device)
netD.apply(weights_init_data)
criterion = nn.BCELoss()
fixed_noise = torch.randn(4, nz, 1, 1, device=device)
real_label = 1
fake_label = 0
optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
history = []
for i, data in enumerate(dataloader):
    netD.zero_grad()
    real_cpu = data[0].to(device)
    batch_size = real_cpu.size(0)
    label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
    output = netD(real_cpu)
    errD_real = criterion(output, label)
    errD_real.backward()
    D_x = output.mean().item()
    noise = torch.randn(batch_size, nz, 1, 1, device=device)
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake.detach())
    errD_fake = criterion(output, label)
    errD_fake.backward()
    D_G_z1 = output.mean().item()
    errD = errD_real + errD_fake
    optimizerD.step()
    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake)
    errG = criterion(output, label)
    errG.backward()
    D_G_z2 = output.mean().item()
    optimizerG.step()
    history.append((errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
fake = netG(fixed_noise)
"""


def test_the_dcgan_example_runs_a_few_steps():
    data = np.random.default_rng(1).uniform(-1, 1, (3, 4, 3, 64, 64)).astype(np.float32)
    scope = run(DCGAN, "tinyflow", dataloader=[(tinyflow.tensor(d), None) for d in data])
    assert len(scope["history"]) == 3 and np.isfinite(scope["history"]).all()
    assert tuple(scope["fake"].shape) == (4, 3, 64, 64)
    w = scope["netD"].main[0].weight.numpy()
    assert abs(w.std() - 0.02) < 0.01  # the .data initialisation took
    assert scope["netG"].main[1].bias.numpy().std() < 0.01


RESIDUAL = """
def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation, groups=groups,
                     bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        norm_layer = nn.BatchNorm2d
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class SegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.SiLU())
        self.block = BasicBlock(8, 16, 2, nn.Sequential(conv1x1(8, 16, 2), nn.BatchNorm2d(16)))
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.head = nn.ConvTranspose2d(16, 1, 3, padding=1)

    def forward(self, x):
        return self.head(self.up(self.block(self.stem(x))))


torch.manual_seed(0)
model = SegNet()
model.load_state_dict(weights)
opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0]))
losses = []
for step in range(3):
    opt.zero_grad()
    loss = criterion(model(torch.tensor(x)), torch.tensor(y))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
"""


def test_a_residual_segmentation_net_matches_torch_from_the_same_weights():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    y = (rng.random((2, 1, 8, 8)) > 0.5).astype(np.float32)
    probe = run(RESIDUAL.split("torch.manual_seed(0)")[0] + "model = SegNet()", "torch")
    weights = {k: v.detach().clone() for k, v in probe["model"].state_dict().items()}
    ours = run(RESIDUAL, "tinyflow", x=x, y=y, weights={k: v.numpy() for k, v in weights.items()})
    theirs = run(RESIDUAL, "torch", x=x, y=y, weights=weights)
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=2e-5)
    for (name, p), q in zip(ours["model"].state_dict().items(), theirs["model"].state_dict().values()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
