#!/usr/bin/env python3
"""Holds the reference pages of docs/ against the code, so that they cannot drift.

  docs_reference_test.py options  SOURCE_DIR SCANGATE_BINARY   docs/configuration.md vs `scangate --help`
  docs_reference_test.py metrics  SOURCE_DIR                   docs/metrics.md vs the families server/, storage/ write
  docs_reference_test.py events   SOURCE_DIR                   docs/metrics.md "Log events" vs the events the code logs
  docs_reference_test.py problems SOURCE_DIR                   docs/api.md vs server/http/problem.cc, deploy/haproxy.cfg,
                                                               deploy/errors/*.http
  docs_reference_test.py links    SOURCE_DIR                   every relative link and #anchor of README.md, docs/*.md,
                                                               CHANGELOG.md and deploy/README.md resolves
  docs_reference_test.py product  SOURCE_DIR                   README.md (at most 200 lines) and docs/*.md describe the
                                                               product as it is: no "issue N", no commit ids (history
                                                               belongs in CHANGELOG.md and bench/RESULTS-history.md)

Each check fails in both directions: a thing the code has and the page lacks, and a thing the page names that the
code no longer has. Each extractor refuses a result far smaller than today's (the pattern would have stopped
finding things) and proves on a probe that its comparison reports a difference. Starts nothing but, for
`options`, `scangate --help`. Python 3 standard library only.
"""

import pathlib
import re
import subprocess
import sys


def fail(msg, items=()):
    print(f'docs_reference_test: {msg}', file=sys.stderr)
    for i in sorted(items):
        print(f'  {i}', file=sys.stderr)
    sys.exit(1)


def read(path):
    return pathlib.Path(path).read_text(encoding='utf-8')


def sources(root, *dirs):
    for d in dirs:
        for p in sorted((root / d).rglob('*')):
            if p.suffix in ('.cc', '.h') and p.is_file():
                yield p


def section(text, heading):
    """The text under the first Markdown heading whose title is `heading`, up to the next heading of its level or
    above."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r'^(#+)\s+(.*?)\s*$', line)
        if m and m.group(2) == heading:
            level = len(m.group(1))
            out = []
            for rest in lines[i + 1:]:
                n = re.match(r'^(#+)\s', rest)
                if n and len(n.group(1)) <= level:
                    break
                out.append(rest)
            return '\n'.join(out)
    fail(f'no heading "{heading}" found')


def table_first_cells(text):
    """The first cell of every row of the Markdown tables in `text` (header and separator rows excluded)."""
    cells = []
    for line in text.splitlines():
        if not line.startswith('|') or re.match(r'^\|[\s:|-]+\|?\s*$', line):
            continue
        cells.append(line.split('|')[1].strip())
    return cells


def compare(what, page, in_code, on_page):
    missing = set(in_code) - set(on_page)
    extra = set(on_page) - set(in_code)
    if missing:
        fail(f'{page} lacks {len(missing)} {what} the code has (add them):', missing)
    if extra:
        fail(f'{page} names {len(extra)} {what} the code no longer has (remove or rename them):', extra)


def probe(what, in_code, on_page_fn):
    """The comparison must see a difference: one entry taken out of the page is reported missing."""
    some = sorted(in_code)[0]
    if some in set(in_code) - set(on_page_fn(some)):
        return
    fail(f'the {what} comparison did not report a removed entry ({some})')


# ---- options ------------------------------------------------------------------------------------------------

def help_options(binary):
    """{option: group} from `scangate --help`: boost::program_options prints each group's caption ("Listening:")
    and then its options ("  --listen arg (=auto)  ...")."""
    out = subprocess.run([binary, '--help'], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        fail(f'{binary} --help exited {out.returncode}: {out.stderr}')
    group, options = None, {}
    for line in out.stdout.splitlines():
        g = re.match(r'^([A-Z][A-Za-z ]*):$', line)
        if g:
            group = g.group(1)
            continue
        o = re.match(r'^  --([a-z0-9-]+)', line)
        if o:
            options[o.group(1)] = group
    if len(options) < 50:
        fail(f'found only {len(options)} options in `scangate --help`; has its format changed?')
    if None in options.values():
        fail('an option of `scangate --help` stands before any group caption')
    return options


def check_options(root, binary):
    options = help_options(binary)
    page = 'docs/configuration.md'
    text = read(root / page)
    # An option's entry is a table row whose first cell names it: | `--listen` | ... (several: `--a`, `--b`).
    documented = {}
    heading = None
    for line in text.splitlines():
        h = re.match(r'^##\s+(.*?)\s*$', line)
        if h:
            heading = h.group(1)
            continue
        if line.startswith('|'):
            for name in re.findall(r'`--([a-z0-9-]+)`', line.split('|')[1]):
                if name in documented:
                    fail(f'{page} has two entries for --{name}')
                documented[name] = heading
    compare('options', page, options, documented)
    wrong = [f'--{o}: under "{documented[o]}", `scangate --help` groups it under "{g}"'
             for o, g in options.items() if documented[o] != g]
    if wrong:
        fail(f'{page} groups options otherwise than `scangate --help` (one "## <group>" section per group):', wrong)
    # Anywhere on the page, an --option that is not one (a renamed flag in a sentence).
    named = set(re.findall(r'(?<![\w-])--([a-z][a-z0-9-]+)', text))
    compare('options', page, options, named)
    probe('option', options, lambda gone: {o for o in documented if o != gone})
    print(f'{page}: all {len(options)} options of `scangate --help`, in its {len(set(options.values()))} groups')


# ---- metrics ------------------------------------------------------------------------------------------------

def metric_families(root):
    """{family: type}: every family server/ and storage/ write through PromWriter::Header("scangate_...", "<type>")
    or PromWriter::Single (a header and its one sample)."""
    families = {}
    for p in sources(root, 'server', 'storage'):
        for m in re.finditer(r'\b(?:Header|Single)\(\s*"(scangate_[a-z0-9_]+)",\s*"([a-z]+)"', read(p)):
            families[m.group(1)] = m.group(2)
    if len(families) < 90:
        fail(f'found only {len(families)} metric families in server/ and storage/; has the way metrics are written '
             'changed? Fix metric_families()')
    # Every sample name the code writes belongs to one of them (else a family is written some other way).
    series = {f + s for f, t in families.items() for s in (('', '_bucket', '_sum', '_count') if t == 'histogram'
                                                          else ('',))}
    stray = set()
    for p in sources(root, 'server/metrics'):
        stray |= {n for n in re.findall(r'"(scangate_[a-z0-9_]+)"', read(p)) if n not in series}
    if stray:
        fail('server/metrics writes samples of families metric_families() does not find:', stray)
    return families


def metric_names_on(text, families):
    """The family names a page names: scangate_* tokens, a histogram's _bucket/_sum/_count as its family."""
    names = set()
    for n in re.findall(r'\bscangate_[a-z0-9_]+', text):
        if n.endswith('_'):
            continue  # a prefix: scangate_filter_* names a group, not a family
        base = re.sub(r'_(bucket|sum|count)$', '', n)
        names.add(base if base in families and families[base] == 'histogram' else n)
    return names


def check_metrics(root):
    families = metric_families(root)
    page = 'docs/metrics.md'
    text = read(root / page)
    metrics_part = text.split('\n## Log events', 1)[0]
    compare('metric families', page, families, metric_names_on(metrics_part, families))
    probe('metric', families, lambda gone: metric_names_on(metrics_part, families) - {gone})
    # The other pages may name only families that exist, or PostgreSQL objects of sql/ (tables, functions).
    sql_names = set()
    for p in sorted((root / 'sql').rglob('*.sql')):
        sql_names |= set(re.findall(r'\bscangate_[a-z0-9_]+', read(p)))
    bad = []
    for p in doc_pages(root):
        for n in metric_names_on(read(p), families):
            if n not in families and n not in sql_names and not re.fullmatch(r'scangate_(p[0-9a-zK]+(_moved)?|\d.*)', n):
                bad.append(f'{p.relative_to(root)}: {n}')
    if bad:
        fail('pages name scangate_* metrics that do not exist (nor are they PostgreSQL objects of sql/):', bad)
    print(f'{page}: all {len(families)} metric families; no page names one that does not exist')


# ---- log events ---------------------------------------------------------------------------------------------

def log_events(root):
    """Every event name the code logs: server::Log(level, "event", ...) and storage's LogSink::Write(severity,
    "event", ...). The event is the string literal(s) after the call's last LogLevel/LogSeverity (a level chosen by
    a condition, or an event chosen by one: `behind ? "dead_letter" : "row_rejected"`)."""
    events = {}
    call = re.compile(r'(?:\bLog|\bWrite)\(\s*((?:[^;{}()]|\([^()]*\))*?(?:LogLevel|LogSeverity)::k\w+)'
                      r'\s*,\s*([^,{]*)', re.S)
    for p in sources(root, 'server', 'storage'):
        for m in call.finditer(read(p)):
            names = re.findall(r'"([a-z_]+)"', m.group(2))
            if not names:
                fail(f'{p.relative_to(root)}: a log call whose event is not a string literal: {m.group(0)[:120]!r}')
            for n in names:
                events.setdefault(n, str(p.relative_to(root)))
    if len(events) < 35:
        fail(f'found only {len(events)} log events in server/ and storage/; has the way events are logged changed? '
             'Fix log_events()')
    return events


def check_events(root):
    events = log_events(root)
    page = 'docs/metrics.md'
    part = section(read(root / page), 'Log events')
    documented = set()
    for cell in table_first_cells(part):
        documented |= set(re.findall(r'`([a-z_]+)`', cell))
    compare('log events', f'{page} "Log events"', events, documented)
    probe('log event', events, lambda gone: documented - {gone})
    print(f'{page}: all {len(events)} log events')


# ---- problem types ------------------------------------------------------------------------------------------

def problem_types(root):
    """{slug: status}: the server's (server/http/problem.cc: Make(status, "slug", ...)) and those the shipped HAProxy
    configuration answers itself (deploy/haproxy.cfg's `http-request return`, deploy/errors/*.http)."""
    types = {}
    for m in re.finditer(r'\bMake\(\s*(\d{3}),\s*"([a-z0-9-]+)"', read(root / 'server/http/problem.cc')):
        types[m.group(2)] = int(m.group(1))
    if len(types) < 20:
        fail(f'found only {len(types)} problem types in server/http/problem.cc; fix problem_types()')
    for m in re.finditer(r'return status (\d{3}) content-type application/problem\+json string '
                         r'"\{\\"type\\":\\"urn:scangate:problem:([a-z0-9-]+)', read(root / 'deploy/haproxy.cfg')):
        types.setdefault(m.group(2), int(m.group(1)))
    for p in sorted((root / 'deploy/errors').glob('*.http')):
        t = read(p)
        status = re.match(r'HTTP/1\.[01] (\d{3})', t)
        slug = re.search(r'urn:scangate:problem:([a-z0-9-]+)', t)
        if not status or not slug:
            fail(f'{p.relative_to(root)}: no status line or problem type')
        types.setdefault(slug.group(1), int(status.group(1)))
    if 'key-not-routable' not in types or 'batch-not-routable' not in types:
        fail('the problem types HAProxy answers (deploy/haproxy.cfg) were not found; fix problem_types()')
    return types


def check_problems(root):
    types = problem_types(root)
    page = 'docs/api.md'
    text = read(root / page)
    part = section(text, 'Problem types')
    rows = {}
    for line in part.splitlines():
        if not line.startswith('|') or re.match(r'^\|[\s:|-]+\|?\s*$', line):
            continue
        cells = [c.strip() for c in line.split('|')[1:-1]]
        slug = re.fullmatch(r'`([a-z0-9-]+)`', cells[0])
        if slug:
            status = re.match(r'(\d{3})', cells[1]) if len(cells) > 1 else None
            rows[slug.group(1)] = int(status.group(1)) if status else None
    compare('problem types', f'{page} "Problem types"', types, rows)
    wrong = [f'{s}: the page says {rows[s]}, the code answers {st}' for s, st in types.items() if rows[s] != st]
    if wrong:
        fail(f'{page} gives problem types another status than the code:', wrong)
    probe('problem type', types, lambda gone: set(rows) - {gone})
    # Every page: a urn:scangate:problem:<slug> must exist.
    bad = []
    for p in doc_pages(root):
        for s in re.findall(r'urn:scangate:problem:([a-z0-9-]+)', read(p)):
            if s not in types:
                bad.append(f'{p.relative_to(root)}: {s}')
    if bad:
        fail('pages name problem types that do not exist:', bad)
    print(f'{page}: all {len(types)} problem types, with their status')


# ---- links --------------------------------------------------------------------------------------------------

def doc_pages(root):
    pages = [root / 'README.md', root / 'CHANGELOG.md', root / 'deploy/README.md']
    pages += sorted((root / 'docs').glob('*.md'))
    return [p for p in pages if p.exists()]


def anchors(path):
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces to '-', repeats -1, -2."""
    seen, out = {}, set()
    in_code = False
    for line in read(path).splitlines():
        if line.startswith('```'):
            in_code = not in_code
        if in_code:
            continue
        m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        title = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', m.group(1))
        slug = re.sub(r'[^\w\- ]', '', title.lower().replace('`', '')).replace(' ', '-')
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f'{slug}-{n}')
    return out


def check_links(root):
    bad, count = [], 0
    for page in doc_pages(root):
        text = re.sub(r'```.*?```', '', read(page), flags=re.S)
        text = re.sub(r'`[^`\n]*`', '', text)
        for target in re.findall(r'\]\(([^)\s]+)\)', text):
            if re.match(r'^[a-z]+:', target):
                continue
            count += 1
            path, _, anchor = target.partition('#')
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f'{page.relative_to(root)}: {target} (no such file)')
            elif anchor and dest.suffix == '.md' and anchor not in anchors(dest):
                bad.append(f'{page.relative_to(root)}: {target} (no such heading in {dest.name})')
    if count < 30:
        fail(f'found only {count} relative links; has the link pattern stopped matching?')
    if bad:
        fail(f'{len(bad)} broken links:', bad)
    # The checker must see a broken anchor.
    if 'no-such-heading' in anchors(root / 'README.md'):
        fail('the anchor check accepts a heading that does not exist')
    print(f'{count} relative links resolve')


# ---- the product, not its history ---------------------------------------------------------------------------

HISTORY = re.compile(r'\b[Ii]ssue \d+|(?<![\w-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![\w-])')


def check_product(root):
    pages = [root / 'README.md'] + sorted((root / 'docs').glob('*.md'))
    readme_lines = len(read(root / 'README.md').splitlines())
    if readme_lines > 200:
        fail(f'README.md has {readme_lines} lines; at most 200 (move the detail to a docs/ page)')
    bad = []
    for p in pages:
        for n, line in enumerate(read(p).splitlines(), 1):
            for m in HISTORY.finditer(line):
                bad.append(f'{p.relative_to(root)}:{n}: {m.group(0)}')
    if bad:
        fail('README.md and docs/ describe the product as it is: history (issue numbers, commit ids) belongs in '
             'CHANGELOG.md and bench/RESULTS-history.md:', bad)
    if not HISTORY.search('fixed in issue 42 at 1558fbb'):
        fail('the history pattern does not match "issue 42" or a commit id')
    print(f'README.md ({readme_lines} lines) and {len(pages) - 1} docs/ pages name no issue and no commit')


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    what, root = sys.argv[1], pathlib.Path(sys.argv[2]).resolve()
    if what == 'options':
        check_options(root, sys.argv[3])
    elif what == 'metrics':
        check_metrics(root)
    elif what == 'events':
        check_events(root)
    elif what == 'problems':
        check_problems(root)
    elif what == 'links':
        check_links(root)
    elif what == 'product':
        check_product(root)
    else:
        fail(f'unknown check {what}')


if __name__ == '__main__':
    main()
