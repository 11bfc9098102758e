"""Which JAX backend a script starts, decided before JAX is imported.

``requirements.txt`` installs ``jax[tpu]``, so libtpu is present on every machine. Where no TPU
is attached, JAX still tries the TPU backend first, and libtpu fills the first screen with
``E0000 ... unexpected worker hostname`` errors and a source-location trace before falling back.
``choose_platforms`` (called by every entry script before anything imports JAX) avoids that:

* ``JAX_PLATFORMS`` set by the user (even to ""): left as it is;
* TPU chips attached (``tpu_attached``): left unset, JAX picks the TPU as always;
* otherwise ``JAX_PLATFORMS`` is set to the backends that can exist here without a TPU:
  ``cpu``, or ``cuda,cpu`` when a CUDA plugin of JAX is installed (JAX skips ``cuda`` by
  itself where no NVIDIA GPU is visible, and fails loudly, as it would anyway, where one is
  visible but broken); with any other PJRT plugin installed (ROCm, Metal, ...) the choice is
  JAX's, as before.

``describe_backend`` then names, in one line, the backend JAX started and why.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import pkgutil

_PLATFORMS_VARIABLE = "JAX_PLATFORMS"
_CUDA_PLUGIN_PREFIX = "xla_cuda"  # jax-cuda12-plugin, jax-cuda13-plugin: jax_plugins.xla_cudaNN

# Why JAX_PLATFORMS has its value; set by choose_platforms, read by describe_backend.
_choice = {"reason": None}


def tpu_attached() -> bool:
    """TPU chips attached to this machine (the device files JAX's own TPU detection looks for:
    /dev/accel* up to v4, /dev/vfio/<n> from v5)."""
    return bool(glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"))


def installed_jax_plugins() -> set[str]:
    """Names of the installed PJRT plugin modules of JAX (``jax_plugins.<name>`` and the
    ``jax_plugins`` entry points), found without importing JAX."""
    names = {entry.name for entry in importlib.metadata.entry_points(group="jax_plugins")}
    spec = importlib.util.find_spec("jax_plugins")
    if spec is not None and spec.submodule_search_locations:
        names.update(module.name for module in
                     pkgutil.iter_modules(list(spec.submodule_search_locations)))
    # PJRT_NAMES_AND_LIBRARY_PATHS="name:path,..." registers plugins too.
    for item in filter(None, os.environ.get("PJRT_NAMES_AND_LIBRARY_PATHS", "").split(",")):
        names.add(item.split(":" if ":" in item else ";", 1)[0])
    return names


def platforms_without_tpu(plugins: set[str]) -> str | None:
    """The JAX_PLATFORMS value that starts what JAX would start here minus the TPU, or None if
    an unknown plugin makes that unclear."""
    unknown = {name for name in plugins if not name.startswith(_CUDA_PLUGIN_PREFIX)}
    if unknown:
        return None
    return "cuda,cpu" if plugins else "cpu"


def choose_platforms(environ=None) -> None:
    """Set ``JAX_PLATFORMS`` where no TPU is attached (see the module docstring). Must run
    before JAX is imported: JAX reads the variable at import; child processes inherit it."""
    environ = os.environ if environ is None else environ
    if _PLATFORMS_VARIABLE in environ:
        _choice["reason"] = f"{_PLATFORMS_VARIABLE}={environ[_PLATFORMS_VARIABLE]!r} as set"
        return
    if tpu_attached():
        _choice["reason"] = "TPU attached"
        return
    value = platforms_without_tpu(installed_jax_plugins())
    if value is None:
        _choice["reason"] = "JAX's choice (PJRT plugins installed)"
        return
    environ[_PLATFORMS_VARIABLE] = value
    _choice["reason"] = (f"no TPU on this machine: {_PLATFORMS_VARIABLE}={value}, libtpu not "
                         "started")


def platform_choice() -> str | None:
    """Why JAX_PLATFORMS has its value (None if ``choose_platforms`` did not run)."""
    return _choice["reason"]


def describe_backend() -> str:
    """One line: the backend JAX started, its device count, and why (starts the backend)."""
    import jax
    devices = jax.devices()
    line = f"backend: {jax.default_backend()}, {len(devices)} device(s)"
    if jax.process_count() > 1:
        line += f" over {jax.process_count()} processes"
    reason = platform_choice()
    return f"{line} ({reason})" if reason else line
