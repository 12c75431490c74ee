"""The on-disk cache in ``.shardlint_cache/`` of the project root.

Two things are kept, both keyed by the file's content hash:
- each file's :class:`ModuleSummary` (what it contributes to the project index);
- each file's findings, valid only for the same *project token*, because a finding in
  ``model.py`` can depend on what ``train.py`` contributes to the index. The token stands for
  the project as the findings were made for it: every file's content hash, the configuration,
  the versions and the rule selection. It carries over to a run where the files that changed
  contribute what they did, but for positions (a comment, a line added: their summaries'
  shapes are the same; see :meth:`Cache.project_token`).
The cache is two JSON files, each replaced atomically (write a temporary file, then rename), so
concurrent runs never read half a file; the last writer wins. ``index-v4.json`` holds each file's
content hash and summary digests, the project token and what it stands for, and the findings:
all a run with nothing changed reads. ``summaries-v4.json`` holds the summaries, read only when
one is needed (a file changed) and written only when one changed; both carry the same
generation stamp, and summaries of another generation (a run stopped between the two writes)
are not used.

Where: ``.shardlint_cache/`` of the project root by default (``shardlint check``: the user asked
for the run). The language server in a workspace its client did not declare trusted writes nothing
into the workspace: its cache goes to :func:`workspace_cache_dir`, a folder of the user's cache
directory named after the project root.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import marshal
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from shardlint.fsio import write_atomic
from shardlint.rules.base import Edit, Finding, Fix, Related
from shardlint.source import Span
from shardlint.warm import DIR

FILE = "index-v4.json"
SUMMARIES = "summaries-v4.json"
# The project index's closures (what each symbol needs, the contexts of calls), marshalled:
# what a run over the same summaries would compute again (see Cache.closures)
CLOSURES = "closures-v1.bin"
_UNREAD = object()  # a summary the summaries file holds, not read yet


def user_cache_dir() -> Path:
    """The user's cache directory, by platform convention: ``%LOCALAPPDATA%`` on Windows,
    ``~/Library/Caches`` on macOS, else ``$XDG_CACHE_HOME`` (when absolute) or ``~/.cache``."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return Path(base) if base else Path.home() / "AppData" / "Local"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    base = os.environ.get("XDG_CACHE_HOME", "")
    return Path(base) if os.path.isabs(base) else Path.home() / ".cache"


def workspace_cache_dir(root: Path | str) -> Path:
    """The cache folder of the project ``root`` outside it: ``<user cache>/shardlint/<name>-<hash>``,
    the hash of the resolved root (two roots never share a folder; the name is for people)."""
    resolved = os.path.realpath(root)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(resolved))[:40].strip(".") or "root"
    key = hashlib.sha256(resolved.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return user_cache_dir() / "shardlint" / f"{name}-{key}"


def digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def _span(s: Span) -> list[int]:
    return [s.line, s.col, s.end_line, s.end_col]


def finding_to_json(f: Finding) -> dict:
    return {
        "code": f.code, "name": f.name, "severity": f.severity, "message": f.message,
        "path": f.path, "span": _span(f.span), "tags": list(f.tags), "symbol": f.symbol,
        "cell": list(f.cell) if f.cell else None,
        "related": [[r.path, _span(r.span), r.message] for r in f.related],
        "fix": None if f.fix is None else {
            "description": f.fix.description, "applicability": f.fix.applicability,
            "edits": [[_span(e.span), e.text] for e in f.fix.edits],
            "recipe": list(f.fix.recipe) if f.fix.recipe is not None else None},
    }


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def _rebased(f: Finding, old: str, new: str, rel: str) -> Finding:
    """``f`` with the file's path ``old`` written ``new``, and paths under the same root moved."""
    rel = rel.replace(os.sep, "/")
    old_n, new_n = old.replace(os.sep, "/"), new.replace(os.sep, "/")
    if old_n.endswith(rel) and new_n.endswith(rel):
        old_root, new_root = old[: len(old) - len(rel)], new[: len(new) - len(rel)]
    else:
        old_root = new_root = None

    def move(p: str) -> str:
        if p == old:
            return new
        if old_root is not None and p.startswith(old_root) and (old_root or not os.path.isabs(p)):
            return new_root + p[len(old_root):]
        return p

    return dataclasses.replace(
        f, path=move(f.path),
        related=tuple(dataclasses.replace(r, path=move(r.path)) for r in f.related))


def finding_from_json(d: dict) -> Finding:
    fix = None
    if d["fix"] is not None:
        recipe = d["fix"].get("recipe")
        fix = Fix(d["fix"]["description"], d["fix"]["applicability"],
                  tuple(Edit(Span(*s), t) for s, t in d["fix"]["edits"]),
                  tuple(recipe) if recipe is not None else None)
    return Finding(d["code"], d["name"], d["severity"], d["message"], d["path"], Span(*d["span"]),
                   fix, tuple(Related(p, Span(*s), m) for p, s, m in d["related"]),
                   tuple(d["tags"]), d["symbol"], tuple(d["cell"]) if d["cell"] else None)


# Summaries and the index file as the cache writes them: compact, and without the encoder's
# check for reference cycles (what it encodes is made of fresh dicts and lists, some shared, none
# cyclic): the same text, a quarter faster (0.20 -> 0.15 s for the corpus' summaries).
encode_json = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def summary_digest(text: str) -> str:
    """The digest of a summary's JSON text as the cache writes it (``Cache.summary_digest``)."""
    return _sha1(text)


def shape_digest(value: dict | None) -> str:
    """The digest of a summary's JSON without its positions (see ``Cache.project_token``)."""
    from shardlint.semantics.flow.summary import without_positions

    return _sha1(encode_json(without_positions(value) if value is not None else None))


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass
class Cache:
    root: Path
    key: str  # shardlint version + what in the config changes the analysis
    enabled: bool = True
    # rel -> [digest, summary json (or its text, from a worker; or a ModuleSummary, until
    # saved), summary digest, shape digest (each None until known)]
    summaries: dict[str, list] = field(default_factory=dict)
    findings: dict[str, list] = field(default_factory=dict)  # rel -> [digest, project, [...]]
    dirty: bool = False
    _loaded: bool = False
    # Where the cache file lives; None: ``.shardlint_cache/`` of ``root``. Set before ``load``.
    folder: Path | None = None
    _generation: str | None = field(default=None, repr=False)  # of the files read
    _unread: bool = field(default=False, repr=False)  # entries hold _UNREAD
    _summaries_dirty: bool = field(default=False, repr=False)
    # rel -> the digest of the summary the summaries file holds (as the index file says), and
    # the rels put since it was read or written: a run whose puts all match needs no rewrite
    _on_disk: dict[str, str] = field(default_factory=dict, repr=False)
    _put: set[str] = field(default_factory=set, repr=False)
    # The project token the findings are kept under, and what it stands for as the last save
    # recorded it: the settings' digest and each file's content digest (see project_token).
    _project: str | None = field(default=None, repr=False)
    _settings: str = field(default="", repr=False)
    _inputs: dict[str, str] = field(default_factory=dict, repr=False)
    # rel -> the entry an entry put this run replaced (the version the inputs name)
    _replaced: dict[str, list] = field(default_factory=dict, repr=False)
    _closures: tuple | None = field(default=None, repr=False)  # (key, ...) to write on save

    @property
    def path(self) -> Path:
        return (self.root / DIR if self.folder is None else self.folder) / FILE

    def load(self) -> None:
        """Read the index file (content hashes, summary digests, the project token, findings);
        the summaries are read when the first one is asked for."""
        if not self.enabled or self._loaded:
            return
        self._loaded = True
        data = _read_json(self.path)
        if not isinstance(data, dict) or data.get("key") != self.key:
            return
        files, findings = data.get("files"), data.get("findings")
        project, settings, inputs = data.get("project"), data.get("settings"), data.get("inputs")
        if not isinstance(files, dict) or not isinstance(findings, dict) or not all(
                isinstance(e, list) and len(e) == 3 for e in files.values()) \
                or not isinstance(project, str) or not isinstance(settings, str) \
                or not isinstance(inputs, dict):
            return
        self.summaries = {rel: [e[0], _UNREAD, e[1], e[2] or None] for rel, e in files.items()}
        self._on_disk = {rel: e[1] for rel, e in files.items()}
        self.findings = findings
        self._project, self._settings, self._inputs = project, settings, inputs
        self._generation = data.get("generation")
        self._unread = bool(self.summaries)

    def _read_summaries(self) -> None:
        """Fill in the summaries from their file; entries it does not hold (another generation,
        a file that cannot be read) are dropped: those files are summarised again."""
        if not self._unread:
            return
        self._unread = False
        data = _read_json(self.path.with_name(SUMMARIES))
        held = data.get("summaries") if isinstance(data, dict) and data.get("key") == self.key \
            and data.get("generation") == self._generation else None
        if not isinstance(held, dict):
            held = {}
            self._generation = None  # (no summaries file of this index's: the next save writes one)
        for rel in [r for r, e in self.summaries.items() if e[1] is _UNREAD]:
            if rel in held:
                self.summaries[rel][1] = held[rel]
            else:
                del self.summaries[rel]
                self._on_disk.pop(rel, None)
        for rel, e in list(self._replaced.items()):
            if e[1] is _UNREAD:
                if rel in held:
                    e[1] = held[rel]
                else:
                    del self._replaced[rel]

    def has_summary(self, rel: str, file_digest: str) -> bool:
        """Whether the cache holds the summary of this file content (without reading it)."""
        entry = self.summaries.get(rel)
        return entry is not None and entry[0] == file_digest

    def summary(self, rel: str, file_digest: str) -> tuple[bool, dict | None]:
        """(hit, summary json) for this file content."""
        entry = self.summaries.get(rel)
        if entry is not None and entry[1] is _UNREAD:
            self._read_summaries()
            entry = self.summaries.get(rel)
        if entry is not None and entry[0] == file_digest:
            return True, entry[1]
        return False, None

    def put_entry(self, rel: str, entry: list) -> None:
        """A whole entry, ``[digest, summary json text, summary digest]`` (made by a worker)."""
        self._put_entry(rel, [*entry, None, None][:4])

    def put_summary(self, rel: str, file_digest: str, summary) -> None:
        """``summary``: a ModuleSummary (serialised only when the cache is saved: the language
        server puts one per keystroke) or its JSON, or None."""
        self._put_entry(rel, [file_digest, summary, None, None])

    def _put_entry(self, rel: str, entry: list) -> None:
        old = self.summaries.get(rel)
        if old is not None and old[0] != entry[0]:
            self._replaced.setdefault(rel, old)  # (the first: the version the inputs name)
        self.summaries[rel] = entry
        self._put.add(rel)
        self._summaries_dirty = self.dirty = True

    def summary_digest(self, rel: str) -> str | None:
        """A hash of what ``rel`` contributes to the project index (its summary), remembered
        with it: other files' findings that point into ``rel`` depend on this, not on every
        byte of the file (a comment or an edit the summary does not see keeps them). None: no
        summary held for ``rel``."""
        entry = self.summaries.get(rel)
        return self._digest_of(entry) if entry is not None else None

    def _value_of(self, entry: list):
        """The entry's summary as JSON (or its text), read from the summaries file first if it
        was not; _UNREAD when that file does not hold it."""
        value = entry[1]
        if value is _UNREAD:
            self._read_summaries()
            value = entry[1]
        if hasattr(value, "to_json"):
            value = entry[1] = value.to_json()
        return value

    def _digest_of(self, entry: list) -> str | None:
        if entry[2] is None:
            value = self._value_of(entry)
            if value is _UNREAD:
                return None
            entry[2] = summary_digest(value if isinstance(value, str) else encode_json(value))
        return entry[2]

    def _shape_of(self, entry: list) -> str | None:
        """The digest of the entry's summary with its positions zeroed (``shape_digest``): the
        same when only lines moved (a line added above); made when first asked for (only for
        the files that changed: see project_token), None when the summary is not held."""
        if entry[3] is None:
            value = self._value_of(entry)
            if value is _UNREAD:
                return None
            entry[3] = shape_digest(json.loads(value) if isinstance(value, str) else value)
        return entry[3]

    def project_token(self, settings: str, inputs: dict[str, str]) -> str:
        """The token this run's findings are kept under (``settings``: a digest of the
        configuration, versions and rule selection; ``inputs``: each project file's content
        digest). The findings the cache holds were made for the project as the last save
        recorded it; they still hold when the settings are the same, no file came or went, and
        each file that changed since contributes to the index what it did, but for positions
        (its summary's shape is the same: a comment, a line added). The token is then the
        cache's, else a new one (and every file's findings are made again). Only the files
        that changed have their shapes made (the version the token names from the summaries
        file, when it was replaced this run)."""
        token = self._project
        if token is None or settings != self._settings or not self._same_shapes(inputs):
            h = hashlib.sha1(settings.encode())
            for rel in sorted(inputs):
                h.update(f"{rel}\0{inputs[rel]}\n".encode("utf-8", "surrogatepass"))
            token = h.hexdigest()
        if (token, settings, inputs) != (self._project, self._settings, self._inputs):
            self._project, self._settings, self._inputs = token, settings, dict(inputs)
            self.dirty = True
        return token

    def _same_shapes(self, inputs: dict[str, str]) -> bool:
        if inputs.keys() != self._inputs.keys():
            return False
        for rel, now in inputs.items():
            was = self._inputs[rel]
            if now == was:
                continue
            new, old = self._version(rel, now), self._version(rel, was)
            if new is None or old is None:
                return False
            digest = self._digest_of(new)
            if digest is not None and digest == self._digest_of(old):
                continue  # (the same summary: the same shape, without making either)
            shape = self._shape_of(new)
            if shape is None or shape != self._shape_of(old):
                return False
        return True

    def _version(self, rel: str, file_digest: str) -> list | None:
        """The entry of ``rel`` for this content digest: the current one, or the one it
        replaced."""
        for entry in (self.summaries.get(rel), self._replaced.get(rel)):
            if entry is not None and entry[0] == file_digest:
                return entry
        return None

    def get_findings(self, rel: str, file_digest: str, project: str,
                     path: str | None = None) -> list[Finding] | None:
        """The findings stored for this file and project digest; ``path``: how this run names
        the file. A run that named it otherwise (an absolute path: the memory check, the
        editor) wrote its own form into the findings, so it is rewritten to this run's form,
        with the other files' paths moved along (else output order and paths would depend on
        which run filled the cache)."""
        entry = self.findings.get(rel)
        if entry is None or entry[0] != file_digest or entry[1] != project:
            return None
        for other, digest in (entry[3] if len(entry) > 3 else {}).items():
            if self.summary_digest(other) != digest:
                return None  # a file its findings point into has moved (or changed)
        found = [finding_from_json(d) for d in entry[2]]
        if path is None or not found or found[0].path == path:
            return found
        return [_rebased(f, found[0].path, path, rel) for f in found]

    def put_findings(self, rel: str, file_digest: str, project: str,
                     findings: list[Finding]) -> None:
        """Also remembered: the summary digest of each other project file the findings point
        into (a related location, or its name with a line in a message), since the project
        digest leaves out positions."""
        if not self.enabled:
            return
        refs: dict[str, str] = {}
        for other in self._pointed_into(rel, findings):
            digest = self.summary_digest(other)
            if digest is not None:
                refs[other] = digest
        self.findings[rel] = [file_digest, project, [finding_to_json(f) for f in findings], refs]
        self.dirty = True

    def _pointed_into(self, rel: str, findings: list[Finding]) -> set[str]:
        """The other files (by rel) whose positions the findings show."""
        if not findings:
            return set()
        out: set[str] = set()
        root = os.path.realpath(self.root)
        names: dict[str, list[str]] | None = None
        for f in findings:
            for r in f.related:
                other = os.path.relpath(os.path.realpath(r.path), root).replace(os.sep, "/")
                if other != rel and other in self.summaries:
                    out.add(other)
            if ".py:" in f.message:
                if names is None:
                    names = {}
                    for known in self.summaries:
                        names.setdefault(known.rsplit("/", 1)[-1], []).append(known)
                for m in re.finditer(r"([\w.-]+\.py):\d", f.message):
                    out.update(k for k in names.get(m.group(1), ()) if k != rel)
        return out

    def _encoded_summaries(self) -> Iterator[str]:
        """The summaries file's ``summaries`` object, in pieces (a worker's summary is already
        JSON text; the whole is never joined in memory: it is as large as the sources). Read
        the summaries file first (``_read_summaries``)."""
        yield "{"
        for i, (rel, e) in enumerate(self.summaries.items()):
            value = e[1]
            if hasattr(value, "to_json"):
                value = value.to_json()
            text = value if isinstance(value, str) else encode_json(value)
            yield f"{',' if i else ''}{json.dumps(rel)}:{text}"
        yield "}"

    def save_summaries(self) -> None:
        """Write the summaries file now, when it changed (a batch does it while its workers run
        the rules); ``save`` then writes the index file that names its generation. A run
        stopped in between leaves two generations, and the next run summarises again."""
        if self.enabled and self._summaries_changed():
            try:
                self._folder()
                self._write_summaries()
            except OSError:
                pass

    def _summaries_changed(self) -> bool:
        """Whether the summaries file must be written: it is missing, or a summary put since it
        was read differs from the one it holds (a comment edited: same summary, new content
        digest, which only the index file records)."""
        if self._generation is None:
            return True
        if not self._summaries_dirty:
            return False
        if any(self._on_disk.get(rel) != self.summary_digest(rel)
               for rel in self._put if rel in self.summaries):
            return True
        self._summaries_dirty = False
        self._put.clear()
        return False

    def _folder(self) -> None:
        folder = self.path.parent
        if self.folder is None:  # inside the project: keep it out of git
            folder.mkdir(exist_ok=True)
            gitignore = folder / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# created by shardlint\n*\n", encoding="utf-8")
        else:
            folder.mkdir(parents=True, exist_ok=True)

    def _write_summaries(self) -> None:
        self._read_summaries()  # (first: what is not rewritten would be lost)
        self._generation = os.urandom(8).hex()
        head = f'{{"key":{json.dumps(self.key)},"generation":"{self._generation}","summaries":'
        write_atomic(self.path.with_name(SUMMARIES),
                     itertools.chain([head], self._encoded_summaries(), ["}"]))
        self._summaries_dirty = False
        self._put.clear()
        self._on_disk = {rel: d for rel, e in self.summaries.items()
                         if (d := self._digest_of(e)) is not None}

    # ---- the project index's closures ----------------------------------------------------------
    def summaries_key(self, inputs: dict[str, str]) -> str | None:
        """A key for what the project index computes from these files' summaries (``inputs``:
        each file's content digest), exactly: their summary digests, positions included (a
        comment edited keeps it; a line added changes it). None when a summary is not held."""
        h = hashlib.sha1(f"{self.key}\0{self.root}\0{sys.version_info[:2]}\n".encode(
            "utf-8", "surrogatepass"))
        for rel in sorted(inputs):
            entry = self.summaries.get(rel)
            if entry is None or entry[0] != inputs[rel]:
                return None
            digest = self._digest_of(entry)
            if digest is None:
                return None
            h.update(f"{rel}\0{digest}\n".encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def closures(self, key: str) -> tuple | None:
        """The closures kept under ``key`` by an earlier run, or None."""
        if not self.enabled:
            return None
        try:
            data = marshal.loads(self.path.with_name(CLOSURES).read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            return None
        if not (isinstance(data, tuple) and len(data) > 1 and data[0] == key):
            return None
        return data[1:]

    def put_closures(self, key: str, closures: tuple) -> None:
        """Keep ``closures`` under ``key``; written with the index file."""
        if self.enabled:
            self._closures = (key, *closures)
            self.dirty = True

    def save(self) -> None:
        if not self.enabled or not self.dirty:
            return
        try:
            self._folder()
            if self._summaries_changed():
                self._write_summaries()
            # (a shape is written only when a run made it: see _shape_of)
            files = {rel: [e[0], self._digest_of(e), e[3] or ""]
                     for rel, e in self.summaries.items()}
            write_atomic(self.path, encode_json(
                {"key": self.key, "generation": self._generation, "files": files,
                 "project": self._project or "", "settings": self._settings,
                 "inputs": self._inputs, "findings": self.findings}))
            if self._closures is not None:
                write_atomic(self.path.with_name(CLOSURES), marshal.dumps(self._closures))
                self._closures = None
            self.dirty = False
        except OSError:
            pass  # a read-only checkout still lints, just without a cache
