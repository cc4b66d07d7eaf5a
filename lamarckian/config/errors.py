"""The one error the configuration layer raises."""


class ConfigError(ValueError):
    """Bad configuration: the message names the key and the file (or ``-m``) that brought it."""
