/* SPDX-License-Identifier: MIT */
/*
 * A small strict JSON parser (RFC 8259, no extensions) for the checkpoint
 * readers (internal): a value parsed into a flat node array, nodes never
 * outnumbering input bytes, nesting capped, every string decoded into one
 * buffer no longer than the input. An object can also be read member by
 * member, each member's nodes and strings replacing the last one's, so a
 * header of many members costs what its largest member does.
 */
#ifndef LY_IMPORTERS_CHECKPOINT_JSON_H
#define LY_IMPORTERS_CHECKPOINT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LY_JSON_NONE SIZE_MAX

typedef enum ly_json_kind {
    LY_J_NULL,
    LY_J_BOOL,
    LY_J_NUMBER,
    LY_J_STRING,
    LY_J_ARRAY,
    LY_J_OBJECT
} ly_json_kind;

typedef struct ly_json_node {
    ly_json_kind kind;
    bool boolean;
    size_t key;    /* object members: offset of the member's name in `strings` */
    size_t key_at; /* ... and where it starts in the input (past its quote) */
    size_t text;   /* strings: offset in `strings`; numbers: offset in the input */
    size_t text_len;
    size_t first_child, next_sibling, child_count;
} ly_json_node;

typedef struct ly_json_doc {
    const char *in;
    size_t len, pos;
    ly_json_node *nodes;
    size_t node_count, node_cap;
    char *strings; /* decoded strings, each NUL-terminated */
    size_t strings_used;
    const char *error; /* static text */
    size_t error_at;
    size_t members, body; /* member by member: members read, where the first starts */
} ly_json_doc;

/* Parse `len` bytes holding one JSON value (and whitespace): node 0 is the
 * root. False with d->error (static text) and d->error_at set. Free with
 * ly_json_free in every case. */
bool ly_json_parse(ly_json_doc *d, const char *in, size_t len);
void ly_json_free(ly_json_doc *d);

/* The object `in` holds, member by member: begin (false when the value is
 * not an object: *kind says what it is, or on a syntax error), then next
 * until *end; each call's member value is node *value, its name
 * ly_json_key(d, *value), valid until the next call. rewind starts again
 * at the first member. A syntax error anywhere is found when reached. */
bool ly_json_object_begin(ly_json_doc *d, const char *in, size_t len, ly_json_kind *kind);
bool ly_json_object_next(ly_json_doc *d, size_t *value, bool *end);
void ly_json_object_rewind(ly_json_doc *d);
/* Where member `value`'s name starts in the input, and that name decoded
 * again from there (into the string buffer, after `skip` bytes of it). */
size_t ly_json_key_at(const ly_json_doc *d, size_t value);
const char *ly_json_key_from(ly_json_doc *d, size_t at, size_t skip);

const char *ly_json_str(const ly_json_doc *d, size_t node);
const char *ly_json_key(const ly_json_doc *d, size_t node);
/* A non-negative integer without fraction or exponent that fits in int64. */
bool ly_json_uint(const ly_json_doc *d, size_t node, int64_t *out);
const char *ly_json_kind_name(ly_json_kind kind);

#endif
