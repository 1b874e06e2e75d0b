#!/usr/bin/env python3
"""Do Gloo headers match the Gloo compiled into LibTorch's libtorch_cpu.so?

PyPI's torch wheel links Gloo in and exports its symbols but ships no Gloo
headers; trainyard compiles c10d's ProcessGroupGloo.hpp against headers from
Debian's libgloo-dev (scripts/install-deps.sh). A header that compiles can
still disagree with the library (vtable order, a class losing its vptr), so
this compares, without a compiler: the virtual functions each header class
declares, in order, with the slots of the vtables the library exports (read
from its dynamic relocations), gloo::Context's polymorphism, and every
out-of-line member declaration with an exported symbol. Tools: nm, readelf,
c++filt (binutils).
Exit 0: they match. Exit 1: they differ; each mismatch is a MISMATCH line.
Exit 2: nothing could be checked (a missing file or tool, a header this script
cannot read); one `error:` line on stderr says what was expected.
usage: check-gloo-headers.py INCLUDE_DIR LIBTORCH_CPU_SO
"""
import os, re, shutil, subprocess, sys


class CannotCheck(Exception):
    """What stops the check before it can say match or mismatch."""


def fail_unchecked(why):
    print(f'error: check-gloo-headers: {why}', file=sys.stderr)
    sys.exit(2)


def report_unchecked(kind, value, tb):
    """Whatever stops the check ends in one error line and exit 2, never a traceback."""
    if isinstance(value, CannotCheck):
        why = str(value)
    else:
        while tb and tb.tb_next:
            tb = tb.tb_next
        why = (f'{kind.__name__} at check-gloo-headers.py:{tb.tb_lineno if tb else "?"} ({value}) while comparing the headers in {inc} with {lib}; '
               'expected Gloo headers and a LibTorch library this script can read; report it with both versions')
    print(f'error: check-gloo-headers: {why}', file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(2)


if len(sys.argv) != 3:
    fail_unchecked(f'expected 2 arguments (INCLUDE_DIR LIBTORCH_CPU_SO), got {len(sys.argv) - 1}; '
                   'usage: check-gloo-headers.py INCLUDE_DIR LIBTORCH_CPU_SO')
inc, lib = sys.argv[1], sys.argv[2]
if not os.path.isfile(f'{inc}/gloo/rendezvous/store.h'):
    fail_unchecked(f"'{inc}' has no gloo/rendezvous/store.h; expected the include folder of a Gloo "
                   '(libgloo-dev\'s usr/include)')
if not (os.path.isfile(lib) and os.access(lib, os.R_OK)):
    fail_unchecked(f"no readable library at '{lib}'; expected LibTorch's lib/libtorch_cpu.so "
                   '(site-packages/torch/lib of the torch environment)')
for tool in ('nm', 'readelf', 'c++filt'):
    if shutil.which(tool) is None:
        fail_unchecked(f'no {tool} on PATH; expected binutils (apt-get install binutils)')
sys.excepthook = report_unchecked
fails = []

# ---------------------------------------------------------------- headers
def strip_comments(s):
    s = re.sub(r'/\*.*?\*/', ' ', s, flags=re.S)
    return re.sub(r'//[^\n]*', ' ', s)

missing = set()

def class_body(path, name):
    """The class's body; a header or class these headers lack is a mismatch (another Gloo)."""
    try:
        with open(f'{inc}/{path}', encoding='utf-8', errors='replace') as f:
            s = strip_comments(f.read())
    except OSError as e:
        if path not in missing:
            missing.add(path)
            fails.append(f'{path}: no such header ({e.strerror}); the library\'s Gloo has it')
        return ''
    m = re.search(r'\b(?:class|struct)\s+%s\b[^;{]*\{' % re.escape(name), s)
    if not m:
        if (path, name) not in missing:
            missing.add((path, name))
            fails.append(f'{path}: declares no class {name}; the library\'s Gloo has it')
        return ''
    i, depth = m.end(), 1
    start = i
    while depth:
        depth += {'{': 1, '}': -1}.get(s[i], 0)
        i += 1
    return s[start:i - 1]

def members(body):
    """Top-level member declarations: (text, has_inline_body)."""
    out, cur, i, depth = [], '', 0, 0
    while i < len(body):
        c = body[i]
        if c == '{' and depth == 0 and ')' in cur:      # inline function body
            d, i = 1, i + 1
            while d:
                d += {'{': 1, '}': -1}.get(body[i], 0)
                i += 1
            out.append((cur.strip(), True)); cur = ''
            continue
        if c in '({<': depth += 1
        if c in ')}>': depth -= 1
        if c == ';' and depth == 0:
            out.append((cur.strip(), False)); cur = ''
        elif c == ':' and depth == 0 and re.search(r'\b(public|private|protected)\s*$', cur):
            cur = ''
        else:
            cur += c
        i += 1
    return out

def split_params(p):
    parts, depth, cur = [], 0, ''
    for c in p:
        if c in '<(': depth += 1
        if c in '>)': depth -= 1
        if c == ',' and depth == 0:
            parts.append(cur); cur = ''
        else:
            cur += c
    if cur.strip() and cur.strip() != 'void':
        parts.append(cur)
    return [x.strip() for x in parts]

TYPEMAP = [(r'\bsize_t\b', 'unsigned long'), (r'\buint64_t\b', 'unsigned long'),
           (r'\bint64_t\b', 'long'), (r'\buint32_t\b', 'unsigned int'),
           (r'\buint8_t\b', 'unsigned char'), (r'\bslot_t\b', 'unsigned long'), (r'\bstd::chrono::milliseconds\b', 'milliseconds')]

def norm_type(t):
    t = re.sub(r'=.*$', '', t)                      # default argument
    for a, b in TYPEMAP:
        t = re.sub(a, b, t)
    t = re.sub(r'\b\w+::', '', t)                   # namespaces
    t = re.sub(r'\bconst\b', '', t)
    return re.sub(r'\s+', '', t)

def header_param(p):
    p = re.sub(r'=.*$', '', p).strip()
    p = re.sub(r'/\*.*?\*/', '', p)
    m = re.match(r'^(.*?[\w>&*\s])\s*\b([A-Za-z_]\w*)$', p)
    # drop a trailing parameter name (but not a lone type like "int")
    if m and not re.fullmatch(r'\s*(unsigned|signed|const)?\s*', m.group(1)) \
         and m.group(2) not in ('int', 'long', 'bool', 'char', 'short', 'double', 'float'):
        p = m.group(1)
    return norm_type(p)

def decl_info(text):
    m = re.search(r'(~?\w+)\s*\(', text)
    if not m:
        return None
    name = m.group(1)
    i, depth = m.end(), 1
    while depth:
        depth += {'(': 1, ')': -1}.get(text[i], 0); i += 1
    params = [header_param(x) for x in split_params(text[m.end():i - 1])]
    tail = text[i:]
    return dict(name=name, params=params, virtual=bool(re.search(r'\bvirtual\b|\boverride\b', text)),
                pure=bool(re.search(r'=\s*0\s*$', tail)), defaulted=bool(re.search(r'=\s*(default|delete)', tail)),
                const=bool(re.search(r'^\s*const\b', tail)), text=text)

def header_funcs(path, cls):
    res = []
    for text, inline in members(class_body(path, cls)):
        if 'friend' in text or re.match(r'^\s*(typedef|using|enum|class|struct)\b', text):
            continue
        d = decl_info(text)
        if d and not re.search(r'\b(static\s+)?constexpr\b|^\s*template\b', text):
            d['inline'] = inline
            res.append(d)
    return res

def vt_key(d):
    return '~' if d['name'].startswith('~') else '%s(%s)%s' % (d['name'], ','.join(d['params']), 'const' if d['const'] else '')

def expected_vtable(chain):
    """chain: [(header, class), ...] from most-base to most-derived."""
    slots = []
    for path, cls in chain:
        for d in header_funcs(path, cls):
            if not d['virtual']:
                continue
            k = vt_key(d)
            if k == '~':
                if '~' not in slots:
                    slots[0:0] = ['~', '~']
            elif k not in slots:
                slots.append(k)
    return slots

# ---------------------------------------------------------------- library
def run_input(cmd, data):
    cmd = [cmd] if isinstance(cmd, str) else list(cmd)
    done = subprocess.run(cmd, input=data, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ['no message'])[-1]
        raise CannotCheck(f"{' '.join(cmd)} failed with exit {done.returncode} ({said}); "
                          'expected it to read the library')
    return done.stdout


def run(*a):
    return run_input(a, None)

dyn = {}
addr2sym = {}
for line in run('nm', '-D', '-S', '--defined-only', lib).splitlines():
    p = line.split()
    if len(p) == 4:
        dyn[p[3]] = (int(p[0], 16), int(p[1], 16))
        addr2sym.setdefault(int(p[0], 16), p[3])
relocs = {}
for line in run('readelf', '-rW', lib).splitlines():
    p = line.split()
    if len(p) >= 4 and re.fullmatch(r'[0-9a-f]{16}', p[0]):
        relocs[int(p[0], 16)] = p
need_dem = set()
def slot_sym(p):
    if p[2].endswith('RELATIVE'):
        return addr2sym.get(int(p[3], 16))
    return p[4] if len(p) > 4 else None

def demangle_all(names):
    names = list(names)
    out = run_input('c++filt', '\n'.join(names)).splitlines()
    return dict(zip(names, out))


def lib_norm_type(t):
    t = t.replace('std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >', 'string')
    t = re.sub(r'std::chrono::duration<long, std::ratio<1l, 1000l> >', 'milliseconds', t)
    prev = None
    while prev != t:   # drop default allocators / deleters
        prev = t
        t = re.sub(r', std::(allocator|default_delete)<(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*>\s*>', '>', t)
    t = re.sub(r'\b\w+::', '', t)
    t = re.sub(r'\bconst\b', '', t)
    t = re.sub(r'\[abi:\w+\]', '', t)
    return re.sub(r'\s+', '', t)

def parse_demangled(s, cls_qual):
    """'gloo::transport::tcp::Pair::send(a, b) const' -> key."""
    if s.startswith('non-virtual thunk') or '(' not in s:
        return None
    head, _, rest = s.partition('(')
    name = re.sub(r'\[abi:\w+\]', '', head.rsplit('::', 1)[-1])
    if name.startswith('~'):
        return '~'
    depth, i = 1, 0
    while depth:
        depth += {'(': 1, ')': -1}.get(rest[i], 0); i += 1
    params = [lib_norm_type(x) for x in split_params(rest[:i - 1])]
    return '%s(%s)%s' % (name, ','.join(params), 'const' if rest[i:].strip().startswith('const') else '')

def lib_vtable(sym):
    if sym not in dyn:
        return None
    a, size = dyn[sym]
    raw = [slot_sym(relocs[a + off]) if a + off in relocs else None for off in range(16, size, 8)]
    # a secondary vtable (multiple inheritance) starts with offset-to-top and typeinfo
    for j in range(1, len(raw)):
        if raw[j] and raw[j].startswith('_ZTI'):
            raw = raw[:j - 1]; break
    # abstract classes get null destructor slots; unnamed slots are wildcards
    dem = demangle_all([r for r in raw if r])
    return [parse_demangled(dem[r], None) if r else None for r in raw]

# ---------------------------------------------------------------- checks
def check_vtable(label, chain, libsym, exact):
    exp = expected_vtable(chain)
    got = lib_vtable(libsym)
    if got is None:
        fails.append(f'{label}: library exports no {libsym}'); return
    ok = len(got) == len(exp) if exact else len(got) >= len(exp)
    if not ok:
        fails.append(f'{label}: header has {len(exp)} virtual slots, library vtable {libsym} has {len(got)}'
                     + ('' if exact else ' (fewer than the base needs)'))
    for i, k in enumerate(exp):
        if i < len(got) and got[i] is not None and got[i] != k:
            fails.append(f'{label}: slot {i}: header says {k}, library has {got[i]}')
    # a named library slot for a base virtual must sit where the header puts it
    for i, g in enumerate(got):
        if g is not None and g in exp and exp.index(g) != i and not (g == '~' and i in (0, 1)):
            fails.append(f'{label}: {g} is slot {i} in the library, slot {exp.index(g)} in the header')
    print(f'{label}: header {len(exp)} slots, library {len(got)} slots')

check_vtable('gloo::rendezvous::Store', [('gloo/common/store.h', 'IStore'), ('gloo/rendezvous/store.h', 'Store')],
             '_ZTVN4gloo10rendezvous11PrefixStoreE', exact=True)
check_vtable('gloo::rendezvous::Store (c10d GlooStore)', [('gloo/common/store.h', 'IStore'), ('gloo/rendezvous/store.h', 'Store')],
             '_ZTVN4c10d16ProcessGroupGloo9GlooStoreE', exact=True)
check_vtable('gloo::transport::Device', [('gloo/transport/device.h', 'Device')],
             '_ZTVN4gloo9transport3tcp6DeviceE', exact=True)
check_vtable('gloo::transport::Context', [('gloo/transport/context.h', 'Context')],
             '_ZTVN4gloo9transport7ContextE', exact=True)
check_vtable('gloo::transport::Pair', [('gloo/transport/pair.h', 'Pair')],
             '_ZTVN4gloo9transport3tcp4PairE', exact=False)
check_vtable('gloo::transport::UnboundBuffer', [('gloo/transport/unbound_buffer.h', 'UnboundBuffer')],
             '_ZTVN4gloo9transport3tcp13UnboundBufferE', exact=True)

# gloo::Context: polymorphic in the header <=> the library has its vtable.
poly = any(d['virtual'] for d in header_funcs('gloo/context.h', 'Context'))
has_vt = '_ZTVN4gloo7ContextE' in dyn
if poly != has_vt:
    fails.append(f'gloo::Context: header {"has" if poly else "has no"} virtual functions, library '
                 f'{"exports" if has_vt else "does not export"} vtable for gloo::Context (object layout differs)')

# Out-of-line (declared, not defined, not pure) members must be exported with
# the same parameter types.
dem_all = demangle_all([s for s in dyn if s.startswith(('_ZN4gloo', '_ZNK4gloo'))])
exported = {}
for m, d in dem_all.items():
    q = d.split('(', 1)[0]
    exported.setdefault(q, set()).add(parse_demangled(d, None))
for path, qual, cls in [('gloo/common/store.h', 'gloo::IStore', 'IStore'),
                        ('gloo/rendezvous/store.h', 'gloo::rendezvous::Store', 'Store'),
                        ('gloo/context.h', 'gloo::Context', 'Context'),
                        ('gloo/transport/context.h', 'gloo::transport::Context', 'Context'),
                        ('gloo/transport/device.h', 'gloo::transport::Device', 'Device'),
                        ('gloo/transport/pair.h', 'gloo::transport::Pair', 'Pair'),
                        ('gloo/transport/unbound_buffer.h', 'gloo::transport::UnboundBuffer', 'UnboundBuffer')]:
    for d in header_funcs(path, cls):
        if d['inline'] or d['pure'] or d['defaulted']:
            continue
        name = d['name']
        q = f'{qual}::{name}' if not name.startswith('~') else f'{qual}::~{qual.rsplit("::", 1)[-1]}'
        k = vt_key(d)
        if k not in exported.get(q, set()):
            have = sorted(x for x in exported.get(q, set()) if x)
            fails.append(f'{q}: header declares {k} out of line; library exports '
                         + (', '.join(have) if have else 'no such symbol'))

for f in fails:
    print('MISMATCH', f)
print(f'{len(fails)} mismatches')
sys.exit(1 if fails else 0)
