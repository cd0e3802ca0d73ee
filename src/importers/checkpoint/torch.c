/* SPDX-License-Identifier: MIT */
/*
 * PyTorch checkpoints (torch.h): torch.save zip archives, PyTorch 1.6+ and
 * 2.x layouts, through the restricted unpickler (pickle.h) into the
 * container: the state dict's tensors from their storages, LibreYOLO's
 * metadata, class names and quant manifest.
 */
#include "importers/checkpoint/torch.h"

#include "core/checked.h"
#include "core/core.h"
#include "importers/checkpoint/pickle.h"
#include "importers/checkpoint/zip.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PyTorch archives ----------------------------------------------------------- */

/* A string value usable as a C string (no NUL inside). */
static bool pv_c_string(const ly_pv *v)
{
    return v && v->kind == LY_PV_STR && strlen(v->u.str.bytes) == v->u.str.len;
}

static ly_status torch_names(ly_checkpoint *ck, const ly_pv *names)
{
    if (names->kind == LY_PV_LIST || names->kind == LY_PV_TUPLE) {
        ly_status st = ly_ck_names_reserve(ck, names->u.seq.len);
        for (size_t i = 0; st == LY_OK && i < names->u.seq.len; i++) {
            const ly_pv *name = names->u.seq.items[i];
            if (!pv_c_string(name))
                return ly_ck_fail(ck, LY_E_FORMAT, "'names'[%zu] is %s, expected a str", i,
                                  ly_pv_a(name));
            st = ly_ck_names_set(ck, i, name->u.str.bytes);
        }
        return st;
    }
    if (names->kind != LY_PV_DICT)
        return ly_ck_fail(ck, LY_E_FORMAT, "'names' is %s, expected dict[int, str] or list[str]",
                          ly_pv_a(names));
    size_t count = 0;
    for (size_t i = 0; i < names->u.dict.len; i++) {
        const ly_pv *k = names->u.dict.items[2 * i], *v = names->u.dict.items[2 * i + 1];
        if (k->kind != LY_PV_INT || k->u.integer < 0 || (uint64_t)k->u.integer >= LY_CK_MAX_CLASSES)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "'names' has %s key%s, expected class indices 0 to %zu", ly_pv_a(k),
                              k->kind == LY_PV_INT ? " out of range" : "", LY_CK_MAX_CLASSES - 1);
        if (!pv_c_string(v))
            return ly_ck_fail(ck, LY_E_FORMAT, "'names'[%lld] is %s, expected a str",
                              (long long)k->u.integer, ly_pv_a(v));
        if ((size_t)k->u.integer + 1 > count) count = (size_t)k->u.integer + 1;
    }
    ly_status st = ly_ck_names_reserve(ck, count);
    for (size_t i = 0; st == LY_OK && i < names->u.dict.len; i++)
        st = ly_ck_names_set(ck, (size_t)names->u.dict.items[2 * i]->u.integer,
                             names->u.dict.items[2 * i + 1]->u.str.bytes);
    return st;
}

/* LibreYOLO's quantization manifest (quantized-checkpoints.md 4), a flat
 * dict, as "quant.<key>" metadata: strings, ints (bools as 0/1), and lists of
 * strings joined by newlines (keep_high_precision). */
static ly_status quant_manifest(ly_checkpoint *ck, const ly_pv *dict)
{
    for (size_t i = 0; i < dict->u.dict.len; i++) {
        const ly_pv *k = dict->u.dict.items[2 * i], *v = dict->u.dict.items[2 * i + 1];
        if (!pv_c_string(k)) continue;
        char key[96];
        if ((size_t)snprintf(key, sizeof key, "quant.%s", k->u.str.bytes) >= sizeof key) continue;
        ly_status st = LY_OK;
        if (pv_c_string(v)) {
            st = ly_ck_add_meta_string(ck, key, v->u.str.bytes);
        } else if (v->kind == LY_PV_INT || v->kind == LY_PV_BOOL) {
            st = ly_ck_add_meta_int(ck, key, v->kind == LY_PV_INT ? v->u.integer : v->u.boolean);
        } else if (v->kind == LY_PV_LIST || v->kind == LY_PV_TUPLE) {
            size_t len = 1;
            bool strings = true;
            for (size_t j = 0; j < v->u.seq.len; j++) {
                strings = strings && pv_c_string(v->u.seq.items[j]);
                if (strings) len += v->u.seq.items[j]->u.str.len + 1;
            }
            if (!strings) {
                st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
            } else {
                char *joined = calloc(1, len);
                if (!joined) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy '%s'", key);
                for (size_t j = 0; j < v->u.seq.len; j++) {
                    if (j) strcat(joined, "\n");
                    strcat(joined, v->u.seq.items[j]->u.str.bytes);
                }
                st = ly_ck_add_meta_string(ck, key, joined);
                free(joined);
            }
        } else {
            st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
        }
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

static ly_status torch_metadata(ly_checkpoint *ck, const ly_pv *top, const char *state_key)
{
    for (size_t i = 0; i < top->u.dict.len; i++) {
        const ly_pv *k = top->u.dict.items[2 * i], *v = top->u.dict.items[2 * i + 1];
        if (!pv_c_string(k) || strcmp(k->u.str.bytes, state_key) == 0) continue;
        const char *key = k->u.str.bytes;
        ly_status st;
        if (strcmp(key, "names") == 0) {
            st = torch_names(ck, v);
            if (st == LY_OK) st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
        } else if (v->kind == LY_PV_STR) {
            if (!pv_c_string(v))
                return ly_ck_fail(ck, LY_E_FORMAT, "metadata '%s' holds a NUL character", key);
            st = ly_ck_add_meta_string(ck, key, v->u.str.bytes);
        } else if (v->kind == LY_PV_INT) {
            st = ly_ck_add_meta_int(ck, key, v->u.integer);
        } else if (strcmp(key, "quant") == 0 && v->kind == LY_PV_DICT) {
            st = quant_manifest(ck, v);
            if (st == LY_OK) st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
        } else {
            /* Training state (optimizer, ema, ...) is not read, tensors included. */
            st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
        }
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

typedef struct torch_archive {
    ly_zip zip;
    const char *stem;
    size_t stem_len;
    bool *verified; /* per zip entry: CRC already checked */
} torch_archive;

static ly_status torch_storage_bytes(ly_checkpoint *ck, torch_archive *ar, const char *key,
                                     const ly_pv_storage *s, const uint8_t **bytes, uint64_t *size)
{
    size_t key_len = strlen(s->key);
    size_t name_len = ar->stem_len + 6 + key_len;
    char *name = malloc(name_len + 1);
    if (!name) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate a record name");
    memcpy(name, ar->stem, ar->stem_len);
    memcpy(name + ar->stem_len, "/data/", 6);
    memcpy(name + ar->stem_len + 6, s->key, key_len + 1);
    const ly_zip_entry *e = ly_zip_find(&ar->zip, name);
    ly_status st = LY_OK;
    if (!e) {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "tensor '%s': its storage '%s' is missing: the archive has no record '%s'",
                        key, s->key, name);
        free(name);
        return st;
    }
    size_t index = (size_t)(e - ar->zip.entries);
    size_t got = 0;
    if (!ar->verified[index]) {
        st = ly_zip_read(&ar->zip, e, bytes, &got);
        if (st != LY_OK) {
            free(name);
            return st;
        }
        ar->verified[index] = true;
    }
    *bytes = ar->zip.data + e->data_at;
    int64_t needed = 0;
    if (!ly_checked_mul(s->numel, (int64_t)ly_elem_size(s->elem), &needed) ||
        e->size < (uint64_t)needed) {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "tensor '%s': record '%s' holds %" PRIu64 " bytes, but its storage "
                        "declares %" PRId64 " %s elements (%" PRId64 " bytes)",
                        key, name, e->size, s->numel, ly_elem_name(s->elem), needed);
    }
    *size = (uint64_t)needed;
    free(name);
    return st;
}

static ly_status torch_state_dict(ly_checkpoint *ck, torch_archive *ar, const ly_pv *sd)
{
    char what[256];
    for (size_t i = 0; i < sd->u.dict.len; i++) {
        const ly_pv *k = sd->u.dict.items[2 * i], *v = sd->u.dict.items[2 * i + 1];
        if (!pv_c_string(k))
            return ly_ck_fail(ck, LY_E_FORMAT, "state dict key %zu is %s, expected a str", i,
                              ly_pv_a(k));
        const char *key = k->u.str.bytes;
        if (v->kind != LY_PV_TENSOR)
            return ly_ck_fail(ck, LY_E_FORMAT, "state dict entry '%s' is %s, expected a tensor",
                              key, ly_pv_a(v));
        const ly_pv_tensor *t = v->u.tensor;
        const ly_pv_storage *s = t->storage->u.storage;
        const uint8_t *bytes = NULL;
        uint64_t size = 0;
        ly_status st = torch_storage_bytes(ck, ar, key, s, &bytes, &size);
        if (st != LY_OK) return st;
        snprintf(what, sizeof what, "its storage '%.200s'", s->key);
        st = ly_ck_add_tensor(ck, key, t->elem, bytes, size, what, t->offset, t->ndim, t->shape,
                              t->stride);
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

/* The state dict and where metadata lives: {"model": sd, meta...},
 * {"state_dict": sd, ...} or a bare state dict. */
static ly_status torch_top_level(ly_checkpoint *ck, torch_archive *ar, const ly_pv *root)
{
    if (root->kind != LY_PV_DICT)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "the pickled object is %s, expected a dict (a state dict or "
                          "LibreYOLO's checkpoint dict)",
                          ly_pv_a(root));
    static const char *const wrappers[] = {"model", "state_dict"};
    for (size_t w = 0; w < 2; w++) {
        const ly_pv *sd = ly_pv_dict_get(root, wrappers[w]);
        if (!sd || sd->kind == LY_PV_TENSOR) continue; /* a tensor: a bare state dict's key */
        if (sd->kind != LY_PV_DICT)
            return ly_ck_fail(ck, LY_E_FORMAT, "'%s' is %s, expected a state dict of tensors",
                              wrappers[w], ly_pv_a(sd));
        ly_status st = torch_state_dict(ck, ar, sd);
        if (st == LY_OK) st = torch_metadata(ck, root, wrappers[w]);
        return st;
    }
    if (root->u.dict.len == 0)
        return ly_ck_fail(ck, LY_E_FORMAT, "the checkpoint is an empty dict: no state dict");
    for (size_t i = 0; i < root->u.dict.len; i++) {
        const ly_pv *k = root->u.dict.items[2 * i], *v = root->u.dict.items[2 * i + 1];
        if (v->kind != LY_PV_TENSOR)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "no state dict: there is no 'model' or 'state_dict' entry, and entry "
                              "'%.200s' is %s, so this is not a bare state dict of tensors either",
                              pv_c_string(k) ? k->u.str.bytes : "?", ly_pv_a(v));
    }
    return torch_state_dict(ck, ar, root);
}

bool ly_torch_looks_like(const uint8_t *data, size_t size)
{
    return ly_zip_looks_like(data, size);
}

ly_status ly_torch_load(ly_checkpoint *ck, const uint8_t *data, size_t size)
{
    torch_archive ar = {0};
    ly_pickle *pickle = NULL;
    char *pickle_context = NULL, *byteorder_name = NULL;
    ly_status st = ly_zip_open(&ar.zip, data, size, ly_ck_context(ck));
    if (st != LY_OK) return st;

    /* torch.save puts every record under one folder, "<stem>/". */
    const ly_zip_entry *pkl = NULL;
    for (size_t i = 0; i < ar.zip.count; i++) {
        const char *name = ar.zip.entries[i].name;
        const char *slash = strchr(name, '/');
        if (!slash || slash == name || strcmp(slash, "/data.pkl") != 0) continue;
        if (pkl) {
            st = ly_ck_fail(ck, LY_E_FORMAT,
                            "two pickles, '%s' and '%s': which one is the checkpoint?", pkl->name,
                            name);
            goto done;
        }
        pkl = &ar.zip.entries[i];
    }
    if (!pkl) {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "missing data.pkl: none of the %zu zip entries is '<folder>/data.pkl', so "
                        "this is not a torch.save checkpoint",
                        ar.zip.count);
        goto done;
    }
    ar.stem = pkl->name;
    ar.stem_len = (size_t)(strchr(pkl->name, '/') - pkl->name);
    ar.verified = calloc(ar.zip.count, sizeof *ar.verified);
    pickle_context = malloc(strlen(ly_ck_context(ck)) + strlen(pkl->name) + 3);
    if (!ar.verified || !pickle_context) {
        st = ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate the archive state");
        goto done;
    }
    sprintf(pickle_context, "%s: %s", ly_ck_context(ck), pkl->name);

    /* PyTorch 2.x records the writer's byte order; storages are raw memory. */
    byteorder_name = malloc(ar.stem_len + sizeof "/byteorder");
    if (!byteorder_name) {
        st = ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate a record name");
        goto done;
    }
    memcpy(byteorder_name, ar.stem, ar.stem_len);
    memcpy(byteorder_name + ar.stem_len, "/byteorder", sizeof "/byteorder");
    const ly_zip_entry *bo = ly_zip_find(&ar.zip, byteorder_name);
    if (bo) {
        const uint8_t *text;
        size_t len;
        st = ly_zip_read(&ar.zip, bo, &text, &len);
        if (st != LY_OK) goto done;
        if (len == 3 && memcmp(text, "big", 3) == 0) {
            st = ly_ck_fail(ck, LY_E_UNSUPPORTED,
                            "'%s' says the checkpoint was written on a big-endian machine; only "
                            "little-endian storages are supported",
                            byteorder_name);
            goto done;
        }
        if (len != 6 || memcmp(text, "little", 6) != 0) {
            st = ly_ck_fail(ck, LY_E_FORMAT, "'%s' is neither \"little\" nor \"big\"",
                            byteorder_name);
            goto done;
        }
    }

    const uint8_t *pkl_bytes;
    size_t pkl_size;
    st = ly_zip_read(&ar.zip, pkl, &pkl_bytes, &pkl_size);
    if (st != LY_OK) goto done;
    const ly_pv *root = NULL;
    st = ly_pickle_load(pkl_bytes, pkl_size, pickle_context, &pickle, &root);
    if (st != LY_OK) goto done;
    st = torch_top_level(ck, &ar, root);

done:
    ly_pickle_free(pickle);
    free(pickle_context);
    free(byteorder_name);
    free(ar.verified);
    ly_zip_close(&ar.zip);
    return st;
}
