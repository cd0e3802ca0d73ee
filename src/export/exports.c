/* SPDX-License-Identifier: MIT */
/* The exporter tables, built from the manifest (see lowering.h): an op's
 * entry names the symbol its export column asks for, so an op without it
 * does not link. */
#include "export/lowering.h"

#define XNN_OF_XNN(xnn, portable) xnn
#define XNN_OF_EITHER(xnn, portable) xnn
#define XNN_OF_PORTABLE(xnn, portable) NULL
#define XNN_OF_FOLD(xnn, portable) NULL
#define XNN_OF_NONE(xnn, portable) NULL

const ly_xnn_export *const ly_xnn_exports[LY_OP_COUNT] = {
#define LY_OP(ID, name, params, defaults, check, parity, export, layout)                           \
    [LY_OP_##ID] =                                                                                 \
        LY_EXPORT_PICK(XNN_OF_, export, &ly_xnn_export_##name, &ly_portable_export_##name),
#include "libreyolo/ops.inc"
#undef LY_OP
};

#define PORTABLE_OF_XNN(xnn, portable) NULL
#define PORTABLE_OF_EITHER(xnn, portable) portable
#define PORTABLE_OF_PORTABLE(xnn, portable) portable
#define PORTABLE_OF_FOLD(xnn, portable) NULL
#define PORTABLE_OF_NONE(xnn, portable) NULL

const ly_portable_export *const ly_portable_exports[LY_OP_COUNT] = {
#define LY_OP(ID, name, params, defaults, check, parity, export, layout)                           \
    [LY_OP_##ID] =                                                                                 \
        LY_EXPORT_PICK(PORTABLE_OF_, export, &ly_xnn_export_##name, &ly_portable_export_##name),
#include "libreyolo/ops.inc"
#undef LY_OP
};
