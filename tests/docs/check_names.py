#!/usr/bin/env python3
"""The names a page writes in backticks exist in the tree (issue 31, item 8):
docs/architecture.md is read by newcomers as a map of the code, and a map
that names a moved file or a renamed function sends them nowhere.

Usage: check_names.py SOURCE_ROOT PAGE...  (PAGE relative to SOURCE_ROOT)

What a backticked span is taken for, and what must then hold (a span is
split at white space for the first three kinds, so `pgcluster.sh run` and
`-include gpuabi/glibc_compat.h` are checked too):

- a path: a word with a '/', made of [A-Za-z0-9_.+-/] only, whose first
  part is a folder at the top of the tree (`src/agent/agent.c`,
  `tests/e2e/`, `configs/systemd/`) or a folder of src/ (`common/err.c`,
  `store/store.h`): it exists, as a file or a folder, there (or as a
  module: `common/err` for err.c and err.h). Other
  paths (`/etc/...`, `build/...`, `mock/`, `text/event-stream`) are the
  running system's, the build's or relative to what the text says, and
  are left alone.
- a file name: a word without '/' ending in a source extension (.c .h .sh
  .py .ts .map .md .html .recipe): some file of that name is in the
  tree (outside build folders).
- a function: `name()`: name is called or defined in src/'s C code
  (comments left out), so the C library's `poll()` passes and a name
  that is gone from the code does not.
- a setting: `key = value` or `key =`: key is a word of the configs/
  files or of src/'s C code (the conf parsers name their keys there).
- a name with an underscore, the whole span (`mgr_session_note`,
  `stats_interval_ms`, `AGENT_EVENT_STATS`, `struct usage_store_ops`, each
  part of `sched_params.quantum_m` or `link->start`): a function, type,
  field, column, macro, setting, meson variable, test or variable of the
  environment, so a word of the code: src/'s and the tests' and
  benchmarks' C code (comments left out), configs/, the tests', benchmarks'
  and scripts/' scripts, meson.build and the Makefile. Prefixes and
  suffixes (`agent_*`, `fgpu_`, `_grow`) and words without '_' (`cancel`,
  `batch`: too common to tell anything) are not checked, nor EXTERNAL's
  names below.

A failure prints PAGE:LINE, the span and which name is missing where.

A page with the sentence "Includes go one way: ..." (architecture.md's
source layout) also has it checked against the #include lines of src/:
its clauses, split at ';', are "`a`, `b` → `x`, `y` (why)" (names in
parentheses are the why, not folders), "`a` and every other component but
`b` → `x`" and "the static `a` includes only `x/...`"; each folder of src/
that includes another's header must be said to, and what is said must be
so.
"""
import os
import re
import sys

SOURCE_EXT = ('.c', '.h', '.sh', '.py', '.ts', '.map', '.md', '.html', '.recipe')
SKIP_DIRS = {'.git', 'node_modules', 'dist', '__pycache__'}
# Names of other projects the pages explain Tessera against; no word of
# Tessera's code holds them.
EXTERNAL = {
    'malloc_consolidate': "glibc's allocator",
    '__tls_get_addr': "glibc's dynamic loader",
    'SO_REUSEPORT': "Linux's socket option, which the page says is never used",
}

PATH_WORD = re.compile(r'^[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]*)+$')
FILE_WORD = re.compile(r'^[A-Za-z0-9_.+-]+$')
FUNC_WORD = re.compile(r'^([A-Za-z_]\w*)\(\)$')
IDENT = r'[A-Za-z_]\w*'
IDENT_PATH = re.compile(r'^(struct\s+)?(%s)((\.|->)%s)*$' % (IDENT, IDENT))
SETTING = re.compile(r'^([a-z][a-z0-9_.]*) =( .*)?$')
WORD = re.compile(r'[A-Za-z_]\w*')


def is_build_dir(name):
    return name == 'build' or name.startswith('build-') or name.startswith('build_')


def tree_files(root):
    """Every file under root but build folders, .git and node_modules."""
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not (rel == '.' and is_build_dir(x))]
        for f in files:
            yield os.path.join(d, f)


def strip_c_comments(text):
    """C source without its comments (strings and character constants kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '/' and text.startswith('/*', i):
            j = text.find('*/', i + 2)
            i = n if j < 0 else j + 2
            out.append(' ')
        elif c == '/' and text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def read(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return f.read()


class Tree:
    def __init__(self, root):
        self.root = root
        self.top = {x for x in os.listdir(root)
                    if os.path.isdir(os.path.join(root, x)) and not x.startswith('.') and not is_build_dir(x)}
        self.src_dirs = {x for x in os.listdir(os.path.join(root, 'src'))
                         if os.path.isdir(os.path.join(root, 'src', x))}
        self.basenames = set()
        self.code_words = set()    # src/'s C code, comments left out
        self.calls = set()         # NAME followed by '(' in that code
        self.conf_words = set()    # configs/
        self.other_words = set()   # tests' and bench's C code, scripts, build files
        for path in tree_files(root):
            rel = os.path.relpath(path, root)
            name = os.path.basename(path)
            self.basenames.add(name)
            top = rel.split(os.sep)[0]
            if top == 'src' and name.endswith(('.c', '.h')):
                code = strip_c_comments(read(path))
                self.code_words.update(WORD.findall(code))
                self.calls.update(re.findall(r'([A-Za-z_]\w*)\s*\(', code))
            elif top == 'configs':
                self.conf_words.update(WORD.findall(read(path)))
            elif top in ('tests', 'bench') and name.endswith(('.c', '.h')):
                self.other_words.update(WORD.findall(strip_c_comments(read(path))))
            elif (top in ('tests', 'bench', 'scripts') and (name.endswith(('.sh', '.py')) or '.' not in name)) \
                    or name in ('meson.build', 'Makefile'):
                self.other_words.update(WORD.findall(read(path)))

    def path_problem(self, word):
        first = word.split('/')[0]
        if first in self.top:
            where = word
        elif first in self.src_dirs:
            where = 'src/' + word
        else:
            return None
        full = os.path.join(self.root, where)
        # `common/err`: the module, err.c with err.h
        if not any(os.path.exists(full + ext) for ext in ('', '.c', '.h')):
            return 'no file or folder %s' % where
        return None

    def ident_problem(self, name):
        affix = name.endswith('_') or (name.startswith('_') and not name.startswith('__'))
        if name in EXTERNAL or '_' not in name or affix:
            return None
        if name in self.code_words or name in self.conf_words or name in self.other_words:
            return None
        return 'no name %s in the code (src/, configs/, tests/, bench/, scripts/, the build files)' % name


def spans(text):
    """(offset, content) of each code span outside fenced blocks."""
    fenced = re.compile(r'^(```|~~~).*?^\1[^\n]*$', re.M | re.S)
    blanked = fenced.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text)
    for m in re.finditer(r'(`+)(.+?)(?<!`)\1(?!`)', blanked, re.S):
        yield m.start(2), m.group(2)


def problems(tree, span):
    s = ' '.join(span.split())
    out = []
    for w in s.split(' '):
        w = w.rstrip(',;:')
        if PATH_WORD.match(w) and not w.startswith(('.', '-')):
            p = tree.path_problem(w)
            if p:
                out.append(p)
        elif FILE_WORD.match(w) and w.endswith(SOURCE_EXT) and not w.startswith('.'):
            if w not in tree.basenames:
                out.append('no file named %s in the tree' % w)
        m = FUNC_WORD.match(w)
        if m and m.group(1) not in tree.calls and m.group(1) not in EXTERNAL:
            out.append("no function %s() defined or called in src/" % m.group(1))
    m = SETTING.match(s)
    if m:
        key = m.group(1)
        if key not in tree.conf_words and key not in tree.code_words and '.' not in key:
            out.append('no setting %s in configs/ or src/' % key)
    m = IDENT_PATH.match(s)
    if m and not s.endswith(SOURCE_EXT):
        for part in re.split(r'\.|->', s[len(m.group(1) or ''):]):
            p = tree.ident_problem(part)
            if p:
                out.append(p)
    return out


def include_graph(root):
    """{folder of src/: the other folders of src/ its files include}"""
    src = os.path.join(root, 'src')
    comps = sorted(x for x in os.listdir(src) if os.path.isdir(os.path.join(src, x)))
    graph = {c: set() for c in comps}
    for c in comps:
        for path in tree_files(os.path.join(src, c)):
            if path.endswith(('.c', '.h')):
                for m in re.finditer(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/', read(path), re.M):
                    if m.group(1) in graph and m.group(1) != c:
                        graph[c].add(m.group(1))
    return graph


def include_sentence_problems(text, graph):
    """What the "Includes go one way" sentence says that the includes do not
    do, and the reverse: (offset, message) pairs."""
    m = re.search(r'Includes go one way:(.*?\.)(\s*\n\s*\n|\s*$)', text, re.S)
    if not m:
        return []
    said = {c: set() for c in graph}
    out = []
    off = m.start()
    for clause in m.group(1).rstrip('.').split(';'):
        flat = ' '.join(clause.split())
        bare = re.sub(r'\([^()]*\)', '', flat)  # the why in parentheses
        only = re.match(r'^\s*the static `(\w+)` includes only (.*)$', bare)
        if only:
            lhs, rhs = [only.group(1)], [n.split('/')[0] for n in re.findall(r'`([^`]+)`', only.group(2))]
        elif '→' in bare:
            left, right = bare.split('→', 1)
            lhs = re.findall(r'`(\w+)`', left)
            rhs = re.findall(r'`(\w+)`', right)
            but = re.search(r'every other component but (.*)$', left)
            if but:
                named = re.findall(r'`(\w+)`', but.group(1))
                lhs = [c for c in graph if c not in named]
        else:
            out.append((off, 'cannot read the clause "%s" (its form is in tests/docs/check_names.py)' % flat))
            continue
        for name in lhs + rhs:
            if name not in graph:
                out.append((off, 'the clause "%s" names %s, not a folder of src/' % (flat, name)))
        for a in lhs:
            said.setdefault(a, set()).update(r for r in rhs if r != a)
    for c in sorted(graph):
        for d in sorted(graph[c] - said.get(c, set())):
            out.append((off, '%s includes %s, which the sentence does not say' % (c, d)))
        for d in sorted(said.get(c, set()) - graph[c]):
            if d in graph:
                out.append((off, 'the sentence says %s includes %s; none of its files does' % (c, d)))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    root = sys.argv[1]
    tree = Tree(root)
    failed = checked = 0
    for page in sys.argv[2:]:
        text = read(os.path.join(root, page))
        for off, span in spans(text):
            checked += 1
            for p in problems(tree, span):
                line = text.count('\n', 0, off) + 1
                print('%s:%d: `%s`: %s' % (page, line, ' '.join(span.split()), p))
                failed += 1
        for off, p in include_sentence_problems(text, include_graph(root)):
            print('%s:%d: "Includes go one way": %s' % (page, text.count('\n', 0, off) + 1, p))
            failed += 1
    if failed:
        print('%d problem(s) (tests/docs/check_names.py says how each kind of name is recognised): correct '
              'the page, or the check where it takes a name for what it is not' % failed)
        return 1
    print('%d backticked spans of %s checked, and which folder includes which' % (checked, ', '.join(sys.argv[2:])))
    return 0


if __name__ == '__main__':
    sys.exit(main())
