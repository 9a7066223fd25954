"""A server should be one thread when it confines itself: Landlock binds only the thread that asks
(and the threads it starts later), so a thread started before the rules — a BLAS pool, a
progress bar's monitor, a public model plug-in's background thread — keeps reading what the rules
close.

:func:`one_thread` keeps torch and the BLAS libraries to one thread and helper threads off until
the rules are in place; :func:`limit_threads` then gives them the cell's threads, which the
confined thread starts. :func:`threads_before_rules` names the threads left all the same
(reading a parquet file starts Arrow's pools; CUDA's driver starts its own): the confinement
string reports them, and ``DPKIT_SERVER_CONFINE=require`` refuses such a server.
"""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""Read by OpenMP and the BLAS libraries when they load (a library loaded later in the server)."""


SPIN_SETTING = ("OPENBLAS_THREAD_TIMEOUT", "4")
"""OpenBLAS's idle threads sleep at once (after 2⁴ cycles; 2²⁸ by default, ≈ 0.1 s of spinning
after each call and after the pool starts). Set in the fork server, read when numpy loads there:
a server's idle pool would otherwise spin on a core the client is computing on."""


HELPER_SETTINGS = {"JE_ARROW_MALLOC_CONF": "background_thread:false"}
"""Libraries' helper threads started at load, turned off unless the user set them: pyarrow's
jemalloc purger (loaded with scikit-learn, pandas, transformers)."""


def quiet_helper_threads() -> None:
    """No helper thread for the libraries of :data:`HELPER_SETTINGS` loaded from now on, nor
    tqdm's monitor (a progress bar's)."""
    for variable, value in HELPER_SETTINGS.items():
        os.environ.setdefault(variable, value)
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


def one_thread() -> None:
    """Torch, and the BLAS libraries loaded from now on, start no thread (before the rules; a
    library loaded already is not asked: asking starts its pool); no helper threads either."""
    import torch

    for variable in THREAD_VARIABLES:
        os.environ[variable] = "1"
    torch.set_num_threads(1)
    quiet_helper_threads()


def limit_threads(n: int) -> None:
    """``n`` compute threads for torch and every BLAS library loaded (after the rules)."""
    import torch

    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(n)
    torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # no BLAS pool to resize but torch's
        return
    threadpool_limits(n)


def other_threads() -> list[str]:
    """Names of this process's threads but the calling one (Linux's ``/proc/self/task``; none
    where it cannot tell): Python's thread names where it knows them, else the kernel's."""
    import threading

    named = {t.native_id: t.name for t in threading.enumerate()}
    try:
        tasks = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []
    names = []
    for task in tasks:
        if task == threading.get_native_id():
            continue
        try:
            comm = open(f"/proc/self/task/{task}/comm").read().strip()
        except OSError:  # ended meanwhile
            continue
        names.append(named.get(task, comm))
    return names


def threads_before_rules(mode: str | None) -> str:
    """How many threads this process has besides the calling one before it confines itself, and
    which (a note for the confinement string: the rules will not bind them); refused where
    ``require`` is asked. One thread is the rule: see the module docstring."""
    from dpkit.boundary.confine import VARIABLE, confine_mode

    others = other_threads()
    mode = mode or confine_mode()
    if not others or mode == "off":
        return ""
    if mode != "require":
        return f" ({len(others)} threads started before the rules, outside them: {', '.join(others)})"
    raise RuntimeError(
        f"the server has {len(others)} other thread(s) before it confines itself "
        f"({', '.join(others)}), which the rules would not bind (Landlock confines the thread "
        "that asks): a public model or dataset plug-in that starts a thread when it loads, or a "
        f"library pool; start threads lazily, or set {VARIABLE}=auto to run with them reported")
