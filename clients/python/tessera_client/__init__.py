"""Python client for Tessera's API (docs/api.md), standard library only.

    import tessera_client
    c = tessera_client.Client()              # the CLI's configuration
    s = c.sessions.create("python:3.11", cpu=1, mem="1g", wait=True)
    code, out = s.exec(["python3", "-c", "print(6 * 7)"])
    s.remove()

See clients/python/README.md for the whole interface.
"""
from .client import (Client, ExecResult, Folder, Folders, Images, Session, Sessions)
from .config import Config
from .errors import ConfigError, TesseraError, WaitTimeout

__version__ = "0.1.0"

__all__ = ["Client", "Config", "ConfigError", "ExecResult", "Folder", "Folders", "Images", "Session",
           "Sessions", "TesseraError", "WaitTimeout", "__version__"]
