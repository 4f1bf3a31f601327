"""The ctypes mirrors of clbt.h's structs against the layout the C
compiler gives them: tests/python_layouts.c prints every field's offset and
every struct's size (CTest builds it and names it in CLBT_LAYOUTS)."""
import ctypes
import os
import subprocess

import pytest

from clbt import _attention, _kv_cache, _library

MIRRORS = {
    "clbt_table_config": _library.TableConfig,
    "clbt_group_config": _library.GroupConfig,
    "clbt_multi_table_config": _library.MultiTableConfig,
    "clbt_commit_info": _library.CommitInfo,
    "clbt_export_request": _library.ExportRequest,
    "clbt_export_buffers": _library.ExportBuffers,
    "clbt_step": _library.Step,
    "clbt_host_step": _library.HostStep,
    "clbt_multi_host_step": _library.MultiHostStep,
    "clbt_kv_cache_config": _kv_cache.KVCacheConfig,
    "clbt_kv_cache_addressing": _kv_cache.KVCacheAddressing,
    "clbt_kv_write": _kv_cache.KVWrite,
    "clbt_attention_config": _attention.AttentionConfig,
    "clbt_attention_batch": _attention.AttentionBatch,
    "clbt_token_slots_request": _library.TokenSlotsRequest,
}


def c_layouts():
    """{struct: {field or "sizeof": bytes}} as the C compiler lays them out."""
    output = subprocess.run([os.environ["CLBT_LAYOUTS"]], check=True, capture_output=True,
                            text=True).stdout
    layouts = {}
    for line in output.splitlines():
        struct, field, value = line.split()
        layouts.setdefault(struct, {})[field] = int(value)
    return layouts


@pytest.mark.parametrize("struct", sorted(MIRRORS))
def test_mirror_has_the_c_fields_at_the_c_offsets(struct):
    mirror = MIRRORS[struct]
    c = c_layouts()[struct]
    python = {name: getattr(mirror, name).offset for name, _ in mirror._fields_}
    python["sizeof"] = ctypes.sizeof(mirror)
    assert python == c


def test_every_mirrored_struct_is_printed():
    assert set(c_layouts()) - {"CLBT_STEP_GATHER", "CLBT_STEP_EXPORT", "CLBT_STEP_DUMMY",
                               "CLBT_ROW_APPEND", "CLBT_ROW_REPLACE"} == set(MIRRORS)


def test_step_flags_and_row_updates_are_the_c_values():
    c = c_layouts()
    assert (_library.STEP_GATHER, _library.STEP_EXPORT, _library.STEP_DUMMY) == (
        c["CLBT_STEP_GATHER"]["value"], c["CLBT_STEP_EXPORT"]["value"],
        c["CLBT_STEP_DUMMY"]["value"])
    # clbt_multi_table_update_row's how
    assert (_library.ROW_APPEND, _library.ROW_REPLACE) == (
        c["CLBT_ROW_APPEND"]["value"], c["CLBT_ROW_REPLACE"]["value"])


def test_sized_structs_carry_their_own_size():
    # what lets a newer library read them at this size (clbt.h, config structs)
    c = c_layouts()
    for struct in ("clbt_table_config", "clbt_group_config", "clbt_multi_table_config",
                   "clbt_step", "clbt_host_step", "clbt_multi_host_step",
                   "clbt_token_slots_request", "clbt_export_request", "clbt_attention_config",
                   "clbt_attention_batch"):
        assert MIRRORS[struct]().struct_size == c[struct]["sizeof"]
