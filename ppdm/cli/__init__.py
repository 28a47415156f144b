"""ppdm.cli: the ``ppdm`` command (see :mod:`ppdm.cli.main`).

gRPC's C core writes its own log lines to stderr (absl's start-up notice, fork-support
and DNS warnings) unless told otherwise before ``grpc`` is first imported; the command
reports what matters itself, so its processes keep those quiet unless the environment
already chose (``GRPC_VERBOSITY=INFO ppdm ...`` brings them back).
"""

import os as _os

_os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
_os.environ.setdefault("GLOG_minloglevel", "2")
_os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "2")

#: The command line being parsed (set by :func:`ppdm.cli.main.main` while it builds the
#: parser; ``None`` when a caller builds the whole parser itself). A command module may
#: leave out sub-commands that are costly to describe (``ppdm simulate JOB`` for every
#: registered job imports every job module, numpy and the protocols with it) when the
#: command line cannot reach them, so ``ppdm --help`` and other commands start light.
command_line: list[str] | None = None
