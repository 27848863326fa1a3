#!/usr/bin/env python3
"""Writes faces/mpi/include/mpi.h and faces/mpi/abi/functions.txt from the
MPI-5.0 standard ABI facts (shared/faces/mpi-5.0-abi.md: tables generated
from the MPI Forum's reference header, so names and values are exact).

Both outputs are checked in; run this again only when the facts change:
    python3 faces/mpi/gen/mkheader.py /work/shared/faces/mpi-5.0-abi.md
functions.txt is what the build generates the unsupported functions from
(gen/unsupported.py), one prototype a line, MPI_ and MPI_T_ only.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FACE = os.path.dirname(HERE)

CODE = re.compile(r"`([^`]*)`")


def sections(lines):
    """(heading, [lines]) for each ## and ### heading."""
    out, head, body = [], None, []
    for line in lines:
        if line.startswith("#"):
            if head is not None:
                out.append((head, body))
            head, body = line.strip(), []
        else:
            body.append(line.rstrip("\n"))
    out.append((head, body))
    return out


def table_rows(body):
    rows = []
    for line in body:
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("Name", "Macro", "Type", "Field", "Item", "Group", "Handle typedef", "Function"):
            continue
        rows.append(cells)
    return rows


def main(facts_path):
    with open(facts_path, encoding="utf-8") as f:
        lines = f.readlines()
    secs = sections(lines)

    handle_types = []  # typedef lines
    handle_consts = []  # (name, type, hex)
    aliases = []  # (alias, name)
    t_nulls = []  # (name, definition)
    enum_groups = []  # (heading, [(name, value, note)])
    int_defines = []  # (name, value)
    ptr_consts = []  # (name, definition)
    callback_code = []
    callback_consts = []
    prototypes = []

    in_section = ""
    for head, body in secs:
        if head is None:
            continue
        if head.startswith("## "):
            in_section = head
        if head.startswith("## 3."):
            for cells in table_rows(body):
                handle_types.append(CODE.findall(cells[1])[0])
        elif in_section.startswith("## 5.") and head.startswith("### ") and "Tool-interface null" not in head:
            m = re.search(r"\(`(MPI_\w+)`\)", head)
            htype = m.group(1)
            for cells in table_rows(body):
                names = CODE.findall(cells[0])
                hexval = cells[1].strip("`")
                handle_consts.append((names[0], htype, hexval))
                for alias in names[1:]:
                    aliases.append((alias, names[0]))
        elif "Tool-interface null" in head:
            for cells in table_rows(body):
                t_nulls.append((CODE.findall(cells[0])[0], CODE.findall(cells[1])[0]))
        elif in_section.startswith("## 6.") and head.startswith("### "):
            rows = table_rows(body)
            if "Integer `#define`" in head:
                for cells in rows:
                    name = CODE.findall(cells[0])[0]
                    codes = CODE.findall(cells[1])
                    int_defines.append((name, codes[0] if codes else cells[1]))
            else:
                group = []
                for cells in rows:
                    name = CODE.findall(cells[0])[0]
                    value = cells[1].split()[0]
                    group.append((name, value, cells[2] if len(cells) > 2 else ""))
                enum_groups.append((head[4:], group))
        elif head.startswith("## 7."):
            for cells in table_rows(body):
                ptr_consts.append((CODE.findall(cells[0])[0], CODE.findall(cells[1])[0]))
        elif head.startswith("## 8."):
            in_code = False
            for line in body:
                if line.startswith("```"):
                    in_code = not in_code
                    continue
                if in_code:
                    callback_code.append(line)
            for cells in table_rows(body):
                definition = CODE.findall(cells[1])[0]
                callback_consts.append((CODE.findall(cells[0])[0], definition))
        elif in_section.startswith("## 10.") and head.startswith("### 10."):
            for line in body:
                if line.startswith("- `"):
                    prototypes.append(CODE.findall(line)[0])

    assert len(handle_consts) == 103, len(handle_consts)
    assert sum(len(g) for _, g in enum_groups) == 215, sum(len(g) for _, g in enum_groups)
    assert len(int_defines) == 12 and len(ptr_consts) == 10 and len(callback_consts) == 14
    assert len(prototypes) == 664, len(prototypes)

    o = []
    w = o.append
    w("/*")
    w(" * mpi.h: memwire's MPI library, built on the MPI-5.0 standard ABI (MPI-5.0")
    w(" * chapter 20): the handle types, predefined handles' and constants' values,")
    w(" * MPI_Status layout and integer types are the standard's, so a program")
    w(" * compiled against any implementation's standard-ABI mpi.h runs on")
    w(" * memwire's libmpi_abi.so.1 unchanged, and the other way round.")
    w(" *")
    w(" * Generated by faces/mpi/gen/mkheader.py from the ABI facts; do not edit.")
    w(" * Build with `mpicc` (faces/mpi, docs/mpi.md); which functions are")
    w(" * implemented and which return MPI_ERR_UNSUPPORTED_OPERATION is in docs/mpi.md.")
    w(" */")
    w("#ifndef MPI_H_ABI")
    w("#define MPI_H_ABI")
    w("")
    w("#include <stdint.h>")
    w("")
    w("#if defined(__cplusplus)")
    w('extern "C" {')
    w("#endif")
    w("")
    w("#define MPI_VERSION    5")
    w("#define MPI_SUBVERSION 0")
    w("#define MPI_ABI_VERSION    1")
    w("#define MPI_ABI_SUBVERSION 0")
    w("")
    w("/* MPI-5.0 section 20.3: integer types */")
    w("typedef intptr_t MPI_Aint;")
    w("typedef int64_t MPI_Offset;")
    w("typedef MPI_Offset MPI_Count;")
    w("")
    w("/* Handles: pointers to incomplete structs (distinct types, pointer-sized). */")
    for t in handle_types:
        w(t)
    w("")
    w("typedef struct {")
    w("    int MPI_SOURCE;")
    w("    int MPI_TAG;")
    w("    int MPI_ERROR;")
    w("    int MPI_internal[5];")
    w("} MPI_Status;")
    w("")
    w("/* Predefined handles */")
    last = None
    for name, htype, hexval in handle_consts:
        if htype != last:
            w("")
            last = htype
        w(f"#define {name} (({htype}){hexval})")
    for alias, name in aliases:
        w(f"#define {alias} {name}")
    w("")
    for name, definition in t_nulls:
        w(f"#define {name} {definition}")
    w("")
    for heading, group in enum_groups:
        names = [n for n, _, _ in group]
        if names[0].startswith("MPI_T_CB_REQUIRE_"):
            # Two of the tool-interface enumerations are named enum types.
            cb = [g for g in group if g[0].startswith("MPI_T_CB_REQUIRE_")]
            so = [g for g in group if g[0].startswith("MPI_T_SOURCE_")]
            rest = [g for g in group if g not in cb and g not in so]
            w(f"/* {heading} */")
            w("typedef enum MPI_T_cb_safety {")
            for n, v, _ in cb:
                w(f"    {n} = {v},")
            w("} MPI_T_cb_safety;")
            w("typedef enum MPI_T_source_order {")
            for n, v, _ in so:
                w(f"    {n} = {v},")
            w("} MPI_T_source_order;")
            group = rest
        else:
            w(f"/* {heading} */")
        w("enum {")
        for n, v, note in group:
            comment = f" /* {note} */" if note else ""
            w(f"    {n} = {v},{comment}")
        w("};")
        w("")
    for name, value in int_defines:
        w(f"#define {name} {value}")
    w("")
    for name, definition in ptr_consts:
        w(f"#define {name} {definition}")
    w("")
    w("/* Callback types */")
    o.extend(callback_code)
    w("")
    for name, definition in callback_consts:
        w(f"#define {name} {definition}")
    w("")
    w("/* Functions */")
    for p in prototypes:
        w(p)
    w("")
    w("/* The profiling interface: every MPI_X is a weak alias of PMPI_X. */")
    for p in prototypes:
        w(re.sub(r"\b(MPI_\w+)\(", r"P\1(", p, count=1))
    w("")
    w("#if defined(__cplusplus)")
    w("}")
    w("#endif")
    w("")
    w("#endif /* MPI_H_ABI */")

    os.makedirs(os.path.join(FACE, "include"), exist_ok=True)
    with open(os.path.join(FACE, "include", "mpi.h"), "w", encoding="utf-8") as f:
        f.write("\n".join(o) + "\n")
    os.makedirs(os.path.join(FACE, "abi"), exist_ok=True)
    with open(os.path.join(FACE, "abi", "functions.txt"), "w", encoding="utf-8") as f:
        f.write("# The MPI-5.0 standard ABI's functions (MPI_ and MPI_T_), one prototype a line.\n")
        f.write("# Generated by faces/mpi/gen/mkheader.py; gen/unsupported.py reads it.\n")
        for p in prototypes:
            f.write(p + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/faces/mpi-5.0-abi.md")
