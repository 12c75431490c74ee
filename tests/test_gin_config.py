"""The gin reader (semantics/file/config_tables.read_gin): a gin file read as data, as the value-flow
layer needs it -- its calls of configurables, its macros, its rules tables."""

from __future__ import annotations

import textwrap

from shardlint.semantics.file.config_tables import read_gin

CONFIG = textwrap.dedent("""
    from __gin__ import dynamic_registration
    import __main__ as train_script
    from trainlib import partitioning
    import trainlib.models as models

    RULES = [('vocab', 'model'), ('mlp', None)]
    MODEL = @models.Decoder()

    train_script.train:
      model = %MODEL
      partitioner = @partitioning.Partitioner()

    partitioning.Partitioner:
      num_partitions = 2
      logical_axis_rules = %RULES
    eval/partitioning.Partitioner.num_partitions = 1
    partitioning.standard_rules.extra = None
    Trainer.mesh_axes = ('data', 'model')
    Trainer.rules = @build_rules()
    models.Decoder.logical_axis_rules = [('batch', 'data'), ('embed', ['fsdp', 'model'])]
""")


def test_bindings_are_calls_of_what_the_imports_name():
    gin, tables = read_gin(CONFIG)
    calls, macros = gin["calls"], gin["macros"]
    by_target = {c[0]: c for c in calls}
    # `import __main__ as train_script`: the script's own functions are no project symbol
    assert not any("train_script" in c[0] or "__main__" in c[0] for c in calls)
    # `@models.Decoder()` in a macro is a call too (its bindings are its arguments)
    assert by_target["ext:trainlib.models.Decoder"][2]["logical_axis_rules"] == [
        ["table", [["batch", "data"], ["embed", ["fsdp", "model"]]]]]
    part = [c for c in calls if c[0] == "ext:trainlib.partitioning.Partitioner"]
    # one call per scope: the unscoped one, and `eval/`'s (unscoped bindings hold there too,
    # its own win)
    assert len(part) == 2
    unscoped, scoped = part
    assert unscoped[2] == {"logical_axis_rules": [["gin_macro", "RULES"]],
                           "num_partitions": [["other"]], "#n": 0}
    assert scoped[2]["num_partitions"] == [["other"]]
    assert scoped[2]["logical_axis_rules"] == [["gin_macro", "RULES"]]
    assert by_target["ext:trainlib.partitioning.standard_rules"][2] == {
        "extra": [["none"]], "#n": 0}
    # a selector no import names is matched by suffix later
    assert by_target["gin:Trainer"][2]["rules"] == [["c", "gin:build_rules", 0, False, []]]
    assert macros["RULES"] == [["table", [["vocab", "model"], ["mlp", None]]]]
    assert macros["MODEL"] == [["c", "ext:trainlib.models.Decoder", 0, False, []]]
    # tables and axes under a key, as YAML's; a rules key bound to a call is a table not known
    # (`%RULES` bound in the file is its table)
    assert {"key": "logical_axis_rules", "line": 16,
            "entries": [["vocab", "model"], ["mlp", None]]} in tables
    assert {"key": "mesh_axes", "line": 19, "axes": ["data", "model"]} in tables
    assert {"key": "rules", "line": 20, "unknown": True} in tables
    assert {"key": "logical_axis_rules", "line": 21,
            "entries": [["batch", "data"], ["embed", ["fsdp", "model"]]]} in tables


def test_a_file_that_does_not_parse_is_not_read():
    assert read_gin("partitioning.Partitioner.rules = [('a', \n") is None
    assert read_gin("this is not gin\n") is None
    assert read_gin("") == ({}, [])


def test_nothing_is_imported_or_called(tmp_path, monkeypatch):
    # a selector naming a module that would fail to import, and a reference to a function that
    # would raise if called: reading the file does neither
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "boom.py").write_text("raise RuntimeError('imported')\n")
    gin, _ = read_gin("import boom\nboom.explode.value = @boom.explode()\n")
    assert [c[0] for c in gin["calls"]] == ["ext:boom.explode"]
