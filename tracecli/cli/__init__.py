"""The command line: parse options, call the library, hand the result to one ``emit``.

One module per command (:mod:`.inspect`, :mod:`.collective`, :mod:`.diff`, :mod:`.export`, :mod:`.plan`, :mod:`.replay`,
:mod:`.calibrate`, :mod:`.status`), each registered on the group in :mod:`.group`, which
turns every error into one line in one place. Options shared by commands are declared in
:mod:`.options` (strategies in :mod:`.strategy`, output in :mod:`.output`), parameter
types in :mod:`.types`; :mod:`.inputs` finds TRACE (as given or remembered by the session).
"""

from .group import cli
from . import calibrate, collective, diff, export, inspect, plan, replay, status  # noqa: F401,E402 - registers

__all__ = ["cli"]
