"""ppdm: privacy-preserving distributed data mining.

See ``ppdm/README.md`` for the map of packages in dependency order.
"""

from ppdm.errors import ConfigError, PartyFailure, PPDMError, ProtocolError

__version__ = "0.1.0"
__all__ = ["ConfigError", "PPDMError", "PartyFailure", "ProtocolError", "__version__"]
