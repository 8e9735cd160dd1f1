"""Where the client finds its endpoint and keys: the same places, in the same
order, as the ``tessera`` command line (src/cli/client.c).

1. the file ``TESSERA_CONFIG`` names (it must exist: it was named on
   purpose), else ``~/.config/tessera/client.conf`` when there is one
   (what ``tessera login`` writes; ``admin.conf`` of ``tessera server`` has
   the same lines);
2. ``TESSERA_ENDPOINT``, ``TESSERA_ACCESS_KEY`` and ``TESSERA_SECRET_KEY``
   override the file's values, each when set and not empty;
3. what the program passes to ``Client(...)`` overrides both.
"""
import os
import re

from .errors import ConfigError

_KEY = re.compile(r"[a-z0-9_.-]+")


class Config:
    """The endpoint and keypair a client signs with; ``file`` is where they
    were read (``None``: the environment or arguments only)."""

    def __init__(self, endpoint=None, access_key=None, secret_key=None, file=None):
        self.endpoint = endpoint
        self.access_key = access_key
        self.secret_key = secret_key
        self.file = file

    def __repr__(self):
        # Never the secret: a repr ends up in notebooks and logs.
        return "Config(endpoint=%r, access_key=%r, file=%r)" % (self.endpoint, self.access_key, self.file)


def parse_conf(text):
    """The ``key = value`` lines of a Tessera config file as a dict.

    The grammar of src/common/conf.c: blank lines and lines starting with
    ``#`` are skipped; keys are lower-case letters, digits, ``_``, ``.`` and
    ``-``; a value may be quoted ("..."), with ``\\"`` and ``\\\\`` its only
    escapes; a key given twice is an error. Raises ValueError saying which
    line is wrong."""
    out, first = {}, {}
    for lineno, line in enumerate(text.split("\n"), 1):
        if "\0" in line:
            raise ValueError("line %d: unexpected NUL byte (not a text file?)" % lineno)
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _KEY.match(line)
        k = m.end() if m else 0
        rest = line[k:].lstrip(" \t")
        if k == 0 or not rest.startswith("="):
            eq = line.find("=")
            if eq > 0:
                raise ValueError("line %d: invalid key '%s': keys are lower-case letters, digits, "
                                 "'_', '.' and '-'" % (lineno, line[:eq].rstrip()[:64]))
            raise ValueError("line %d: expected 'key = value'" % lineno)
        key = line[:k]
        if key in out:
            raise ValueError("line %d: duplicate key '%s' (first set on line %d)" % (lineno, key, first[key]))
        value = rest[1:].lstrip()
        if value.startswith('"'):
            value = _unquote(value, lineno)
        out[key], first[key] = value, lineno
    return out


def _unquote(v, lineno):
    res, i = [], 1
    while i < len(v):
        c = v[i]
        if c == "\\" and i + 1 < len(v) and v[i + 1] in '"\\':
            res.append(v[i + 1])
            i += 2
        elif c == '"':
            if i != len(v) - 1:
                raise ValueError("line %d: text after the closing quote" % lineno)
            return "".join(res)
        else:
            res.append(c)
            i += 1
    raise ValueError("line %d: unterminated quoted value" % lineno)


def default_path(environ=None):
    """``~/.config/tessera/client.conf`` (None without a home directory)."""
    env = os.environ if environ is None else environ
    home = env.get("HOME") or os.path.expanduser("~")
    if not home or home == "~":
        return None
    return os.path.join(home, ".config", "tessera", "client.conf")


def read_file(path):
    """Parses the config file at PATH; ConfigError naming it when it cannot."""
    try:
        with open(path, "rb") as f:
            data = f.read((16 << 20) + 1)
    except OSError as e:
        raise ConfigError("cannot read %s: %s" % (path, e.strerror or e)) from None
    if len(data) > 16 << 20:
        raise ConfigError("%s: file too large for a config" % path)
    try:
        return parse_conf(data.decode("utf-8", errors="replace"))
    except ValueError as e:
        raise ConfigError("%s: %s" % (path, e)) from None


def load(config=None, endpoint=None, access_key=None, secret_key=None, environ=None):
    """The Config a Client uses (see the module's text for the order).

    CONFIG is a file to read in place of TESSERA_CONFIG / client.conf, or
    ``False`` to read no file (the environment and arguments only)."""
    env = os.environ if environ is None else environ
    cfg = Config()
    path, named = None, False
    if config is not None and config is not False:
        path, named = os.fspath(config), True
    elif config is None and env.get("TESSERA_CONFIG"):
        path, named = env["TESSERA_CONFIG"], True
    elif config is None:
        p = default_path(env)
        if p and os.path.exists(p):
            path = p
    if path:
        try:
            values = read_file(path)
        except ConfigError as e:
            if named and config is None:
                e.message = "TESSERA_CONFIG: " + e.message
                e.args = (e.message,)
            raise
        cfg.endpoint = values.get("endpoint")
        cfg.access_key = values.get("access_key")
        cfg.secret_key = values.get("secret_key")
        cfg.file = path
    for attr, var in (("endpoint", "TESSERA_ENDPOINT"), ("access_key", "TESSERA_ACCESS_KEY"),
                      ("secret_key", "TESSERA_SECRET_KEY")):
        if env.get(var):
            setattr(cfg, attr, env[var])
    for attr, val in (("endpoint", endpoint), ("access_key", access_key), ("secret_key", secret_key)):
        if val is not None:
            setattr(cfg, attr, val)
    where = cfg.file or "the environment"
    if not cfg.endpoint:
        raise ConfigError("no endpoint configured; run 'tessera login', set TESSERA_CONFIG, "
                          "or pass endpoint= to Client()")
    if not cfg.access_key:
        raise ConfigError("no access_key in %s; run 'tessera login', set TESSERA_ACCESS_KEY, "
                          "or pass access_key= to Client()" % where)
    if not cfg.secret_key:
        raise ConfigError("no secret_key in %s; run 'tessera login', set TESSERA_SECRET_KEY, "
                          "or pass secret_key= to Client()" % where)
    return cfg
