"""tinyflow keeps freed memory for the next step (glibc mallopt at import): a step's freed
temporaries (6 x 8 MB here) allocated again fault no pages in, unless the tuning is off."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's malloc only")

PROBE = """
import resource, numpy as np
np._core.multiarray._set_madvise_hugepage(False)  # count 4 KiB pages whatever the THP setting
import tinyflow
from tinyflow.kernels import _cpu
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    arrays = [np.ones(2 << 20, dtype=np.float32) for _ in range(6)]  # 6 x 8 MB, every page written
    del arrays  # a step's temporaries, all freed at its end
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(faults[-1])
"""


def _faults(**env: str) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "TINYFLOW_TUNE_MALLOC"}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                         check=True, timeout=60)
    return int(out.stdout.split()[-1])


def _huge_pages_always() -> bool:
    """With transparent huge pages 'always', mmapped blocks fault in 2 MiB at a time: few faults either way."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="utf-8") as f:
            return "[always]" in f.read()
    except OSError:
        return False


def test_a_freed_temporary_is_reused_without_page_faults():
    assert _faults() < 500  # the same heap pages again
    if _huge_pages_always():
        pytest.skip("transparent huge pages 'always': glibc's default faults few pages too")
    assert _faults(TINYFLOW_TUNE_MALLOC="0") > 6000  # glibc's default trims the heap: its 12,288 pages fault in again


def test_the_users_own_malloc_settings_win():
    from tinyflow.kernels import _cpu

    if _huge_pages_always():
        pytest.skip("transparent huge pages 'always': the page faults do not tell the settings apart")
    assert _faults(MALLOC_ARENA_MAX="2") > 6000  # a MALLOC_* variable: tinyflow leaves malloc alone
    assert isinstance(_cpu.tune_allocator(), bool)
