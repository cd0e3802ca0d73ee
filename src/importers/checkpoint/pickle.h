/* SPDX-License-Identifier: MIT */
/*
 * Restricted unpickler for checkpoint pickles (internal).
 *
 * Accepts pickle protocols 2 to 5 limited to the opcodes that state dicts and
 * LibreYOLO's metadata produce, and only the globals torch.load(weights_only=
 * True) allows for them: collections.OrderedDict, the tensor rebuild functions,
 * the typed and untyped storage classes and torch dtypes. Nothing is executed:
 * every allowed global maps to a fixed constructor below, and everything else
 * is refused with LY_E_FORMAT and a message naming the global and byte offset.
 *
 * Storages come from persistent ids ('storage', storage_type, key, location,
 * numel) and are left unresolved: the caller maps keys to archive entries.
 * Values live in an arena freed at once with the ly_pickle; the object graph may
 * share nodes and even contain cycles (lists that hold themselves), so callers
 * walk only the levels they need, never recursively.
 */
#ifndef LY_IO_PICKLE_H
#define LY_IO_PICKLE_H

#include "importers/checkpoint/elem.h"

typedef enum ly_pv_kind {
    LY_PV_NONE,
    LY_PV_BOOL,
    LY_PV_INT,
    LY_PV_FLOAT,
    LY_PV_STR,
    LY_PV_BYTES,
    LY_PV_TUPLE,
    LY_PV_LIST,
    LY_PV_DICT, /* dict or collections.OrderedDict: insertion order kept */
    LY_PV_GLOBAL,
    LY_PV_STORAGE,
    LY_PV_TENSOR
} ly_pv_kind;

typedef struct ly_pv ly_pv;

typedef struct ly_pv_storage {
    ly_elem elem;
    const char *key; /* archive record name under "<stem>/data/" */
    int64_t numel;   /* elements of `elem` (bytes when untyped) */
} ly_pv_storage;

typedef struct ly_pv_tensor {
    const ly_pv *storage; /* LY_PV_STORAGE */
    ly_elem elem;         /* never LY_ELEM_UNTYPED */
    int64_t offset;       /* in elements of `elem` */
    int ndim;
    int64_t shape[LY_MAX_DIMS];
    int64_t stride[LY_MAX_DIMS];
} ly_pv_tensor;

struct ly_pv {
    ly_pv_kind kind;
    union {
        bool boolean;
        int64_t integer;
        double real;
        struct {
            const char *bytes; /* NUL-terminated; may hold NULs before `len` */
            size_t len;
        } str; /* STR and BYTES */
        struct {
            ly_pv **items;
            size_t len, cap;
        } seq; /* TUPLE and LIST */
        struct {
            ly_pv **items;   /* key i at items[2i], its value at items[2i+1] */
            size_t len, cap; /* in pairs */
        } dict;
        int global; /* an internal id of the allowed global */
        const ly_pv_storage *storage;
        const ly_pv_tensor *tensor;
    } u;
};

typedef struct ly_pickle ly_pickle;

/* Unpickle `size` bytes. `context` prefixes every message ("ly_checkpoint_open:
 * a.pt: a/data.pkl") and must outlive the call. On success *root is the
 * unpickled object, owned by *out (free with ly_pickle_free). */
ly_status ly_pickle_load(const uint8_t *bytes, size_t size, const char *context, ly_pickle **out,
                         const ly_pv **root);
void ly_pickle_free(ly_pickle *p);

/* Python's name for a value's type, for messages ("str", "tensor", ...). */
const char *ly_pv_type_name(const ly_pv *v);

/* The same with an article, for sentences ("an int", "None", "a tensor"). */
const char *ly_pv_a(const ly_pv *v);

/* The value stored under the string key `key` in a dict, or NULL. */
const ly_pv *ly_pv_dict_get(const ly_pv *dict, const char *key);

#endif
