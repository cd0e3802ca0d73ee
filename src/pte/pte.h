/* SPDX-License-Identifier: MIT */
/*
 * The ExecuTorch `.pte` format (ExecuTorch 1.2 shape) and the XNNPACK delegate payload, in memory.
 *
 * Specification: ../shared/specs/executorch.md section B; schemas equivalent to ExecuTorch's in
 * docs/schema/ (program.fbs, scalar_type.fbs, xnnpack.fbs), decodable with Debian's `flatc`.
 *
 * Two directions over one data model:
 *  - ly_pte_encode: a caller-built ly_pte_program (arrays owned by the caller) plus the raw bytes
 *    of each segment -> a complete file (ET12 flatbuffer, eh00 extended header, 128-aligned
 *    segments), laid out as ExecuTorch's serializer does.
 *  - ly_pte_decode / ly_pte_read_file: file bytes -> an owned, fully validated ly_pte_program
 *    (flatbuffer verification, then the load/method_meta/Method::init checks of spec B4 that do
 *    not need a backend). Strings and byte blobs point into the program's own copy of the file;
 *    every other array is a decoded copy. Hostile input gives LY_E_FORMAT and a message
 *    "<what>: <field path>: <what was expected>", never a crash.
 * The same for the XNNPACK payload: ly_xnn_encode / ly_xnn_decode.
 *
 * Field names and order follow the schemas (ET-1.2); vectors are (pointer, n_ count) pairs.
 * Encoding: every vector field is written (empty when n_ is 0, the pointer may then be NULL),
 * except the optional ones documented as "written only when ..."; strings: NULL = absent.
 * Decoding: a vector pointer is NULL exactly when the field is absent from the file (an empty
 * but present vector has a non-NULL pointer); the decoder refuses absent fields wherever
 * ExecuTorch's runtime would. ly_pte_encode decodes what it wrote and returns the decoder's
 * error, so a model the reader would refuse (e.g. without a "forward" plan) is never written.
 *
 * Also here: pte_samples.h (two small valid programs built with this model, for tests and as
 * an example of filling it) and pte_internal.h (encoder options for writing hostile files).
 *
 * CHANGES to signatures after first publication are listed here:
 *   (none yet)
 */
#ifndef LY_PTE_PTE_H
#define LY_PTE_PTE_H

#include "core/checked.h"
#include "libreyolo/libreyolo.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Constants ---------------------------------------------------------- */

#define LY_PTE_FILE_IDENTIFIER "ET12"
#define LY_PTE_HEADER_MAGIC "eh00"
enum {
    LY_PTE_HEADER_SIZE = 32,        /* eh00 header length the writer puts in the file */
    LY_PTE_SEGMENT_ALIGNMENT = 128, /* ExecutorchBackendConfig.segment_alignment */
    LY_PTE_TENSOR_ALIGNMENT = 16,   /* constant tensors in the constant segment; planned memory */
    LY_PTE_MAX_RANK = 16,           /* kTensorDimensionLimit */
};
#define LY_PTE_XNNPACK_BACKEND_ID "XnnpackBackend"
#define LY_PTE_FORWARD "forward"

/* ScalarType (schema/scalar_type.fbs). Values 8-10 and 18-21 are not in the schema. */
typedef enum ly_pte_scalar_type {
    LY_PTE_BYTE = 0,
    LY_PTE_CHAR = 1,
    LY_PTE_SHORT = 2,
    LY_PTE_INT = 3,
    LY_PTE_LONG = 4,
    LY_PTE_HALF = 5,
    LY_PTE_FLOAT = 6,
    LY_PTE_DOUBLE = 7,
    LY_PTE_BOOL = 11,
    LY_PTE_QINT8 = 12,
    LY_PTE_QUINT8 = 13,
    LY_PTE_QINT32 = 14,
    LY_PTE_BFLOAT16 = 15,
    LY_PTE_QUINT4X2 = 16,
    LY_PTE_QUINT2X4 = 17,
    LY_PTE_BITS16 = 22,
    LY_PTE_FLOAT8E5M2 = 23,
    LY_PTE_FLOAT8E4M3FN = 24,
    LY_PTE_FLOAT8E5M2FNUZ = 25,
    LY_PTE_FLOAT8E4M3FNUZ = 26,
    LY_PTE_UINT16 = 27,
    LY_PTE_UINT32 = 28,
    LY_PTE_UINT64 = 29,
} ly_pte_scalar_type;

/* Bytes per element of a ScalarType; 0 for a value not in the schema. */
size_t ly_pte_scalar_size(int scalar_type);
/* "FLOAT", ... ; "?" for a value not in the schema. */
const char *ly_pte_scalar_name(int scalar_type);

typedef enum ly_pte_shape_dynamism {
    LY_PTE_STATIC = 0,
    LY_PTE_DYNAMIC_BOUND = 1,
    LY_PTE_DYNAMIC_UNBOUND = 2, /* refused by the portable runtime, hence by the decoder */
} ly_pte_shape_dynamism;

/* A byte range: a blob in the file (decode) or caller memory (encode). */
typedef struct ly_pte_bytes {
    const uint8_t *data;
    size_t size;
} ly_pte_bytes;

/* Whether `size` bytes at `offset` lie within `limit` bytes: the sum of two
 * sizes read from a file, in checked arithmetic (src/core/checked.h). */
static inline bool ly_pte_range_within(uint64_t offset, uint64_t size, uint64_t limit)
{
    int64_t end;
    return offset <= INT64_MAX && size <= INT64_MAX &&
           ly_checked_add((int64_t)offset, (int64_t)size, &end) && (uint64_t)end <= limit;
}

/* ---- Program model ------------------------------------------------------ */

typedef struct ly_pte_allocation {
    bool present; /* absent: data pointer supplied at input time (or constant) */
    uint32_t
        memory_id; /* 1-based: planned buffer memory_id-1 = non_const_buffer_sizes[memory_id] */
    uint32_t memory_offset_low;
    uint32_t memory_offset_high;
} ly_pte_allocation;

typedef struct ly_pte_extra_tensor_info {
    bool present;
    uint64_t mutable_data_segments_idx;
    const char *fully_qualified_name; /* NULL when absent */
    uint8_t location;                 /* 0 SEGMENT, 1 EXTERNAL */
} ly_pte_extra_tensor_info;

typedef struct ly_pte_tensor {
    int8_t scalar_type; /* ly_pte_scalar_type */
    int32_t storage_offset;
    const int32_t *sizes;
    size_t n_sizes;
    const uint8_t *dim_order; /* outer -> inner; [0..n-1] for contiguous */
    size_t n_dim_order;
    bool requires_grad;
    uint32_t data_buffer_idx; /* > 0 without allocation_info: constant_segment.offsets[idx] */
    ly_pte_allocation allocation_info;
    int8_t layout;
    uint8_t shape_dynamism; /* ly_pte_shape_dynamism */
    ly_pte_extra_tensor_info extra_tensor_info;
} ly_pte_tensor;

/* KernelTypes union tags. */
typedef enum ly_pte_evalue_type {
    LY_PTE_EVALUE_NONE = 0, /* not a valid EValue: the decoder refuses it */
    LY_PTE_EVALUE_NULL = 1,
    LY_PTE_EVALUE_INT = 2,
    LY_PTE_EVALUE_BOOL = 3,
    LY_PTE_EVALUE_DOUBLE = 4,
    LY_PTE_EVALUE_TENSOR = 5,
    LY_PTE_EVALUE_STRING = 6,
    LY_PTE_EVALUE_INT_LIST = 7,
    LY_PTE_EVALUE_DOUBLE_LIST = 8,
    LY_PTE_EVALUE_BOOL_LIST = 9,
    LY_PTE_EVALUE_TENSOR_LIST = 10,
    LY_PTE_EVALUE_OPTIONAL_TENSOR_LIST = 11,
} ly_pte_evalue_type;

typedef struct ly_pte_evalue {
    ly_pte_evalue_type type;
    union {
        int64_t int_val;
        bool bool_val;
        double double_val;
        ly_pte_tensor tensor;
        const char *string_val; /* NULL when absent */
        struct {
            const int64_t *items;
            size_t n_items;
        } int_list;
        struct {
            const double *items;
            size_t n_items;
        } double_list;
        struct {
            const bool *items;
            size_t n_items;
        } bool_list;
        struct { /* EValue indices; -1 = None in an optional tensor list */
            const int32_t *items;
            size_t n_items;
        } tensor_list, optional_tensor_list;
    } u;
} ly_pte_evalue;

/* InstructionArguments union tags. */
typedef enum ly_pte_instruction_type {
    LY_PTE_INSTR_NONE = 0, /* refused by the decoder */
    LY_PTE_KERNEL_CALL = 1,
    LY_PTE_DELEGATE_CALL = 2,
    LY_PTE_MOVE_CALL = 3,
    LY_PTE_JUMP_FALSE_CALL = 4,
    LY_PTE_FREE_CALL = 5,
} ly_pte_instruction_type;

typedef struct ly_pte_instruction {
    ly_pte_instruction_type type;
    union {
        struct {
            int32_t op_index;    /* into plan.operators */
            const int32_t *args; /* EValue indices, outputs last ("out" variants) */
            size_t n_args;
        } kernel_call;
        struct {
            int32_t delegate_index; /* into plan.delegates */
            const int32_t *args; /* [inputs..., outputs...]; XNNPACK indexes them by external id */
            size_t n_args;
        } delegate_call;
        struct {
            int32_t move_from, move_to;
        } move_call;
        struct {
            int32_t cond_value_index, destination_instruction;
        } jump_false_call;
        struct {
            int32_t value_index;
        } free_call;
    } u;
} ly_pte_instruction;

typedef struct ly_pte_frame {
    const char *filename, *name, *context; /* NULL when absent */
    int32_t lineno;
} ly_pte_frame;

typedef struct ly_pte_frame_list {
    const ly_pte_frame *items;
    size_t n_items;
} ly_pte_frame_list;

typedef struct ly_pte_chain {
    const int32_t *inputs;
    size_t n_inputs;
    const int32_t *outputs;
    size_t n_outputs;
    const ly_pte_instruction *instructions;
    size_t n_instructions;
    const ly_pte_frame_list *stacktrace; /* optional: NULL = absent (not written) */
    size_t n_stacktrace;
} ly_pte_chain;

typedef struct ly_pte_operator {
    const char *name;     /* "aten::upsample_nearest2d" */
    const char *overload; /* "vec_out"; "" or NULL for none */
} ly_pte_operator;

typedef enum ly_pte_data_location {
    LY_PTE_INLINE = 0,  /* index into Program.backend_delegate_data */
    LY_PTE_SEGMENT = 1, /* index into Program.segments */
} ly_pte_data_location;

typedef struct ly_pte_compile_spec {
    const char *key;
    ly_pte_bytes value;
} ly_pte_compile_spec;

typedef struct ly_pte_delegate {
    const char *id;   /* LY_PTE_XNNPACK_BACKEND_ID */
    uint8_t location; /* ly_pte_data_location */
    uint32_t index;
    const ly_pte_compile_spec *compile_specs; /* always written, even empty */
    size_t n_compile_specs;
} ly_pte_delegate;

typedef struct ly_pte_plan {
    const char *name;
    bool has_container_meta_type;
    const char *encoded_inp_str, *encoded_out_str; /* pytree specs; NULL when absent */
    const ly_pte_evalue *values;
    size_t n_values;
    const int32_t *inputs;
    size_t n_inputs;
    const int32_t *outputs;
    size_t n_outputs;
    const ly_pte_chain *chains;
    size_t n_chains;
    const ly_pte_operator *operators;
    size_t n_operators;
    const ly_pte_delegate *delegates;
    size_t n_delegates;
    /* [0] reserved (written 0); planned buffer k has size [k+1]. */
    const int64_t *non_const_buffer_sizes;
    size_t n_non_const_buffer_sizes;
} ly_pte_plan;

typedef struct ly_pte_data_segment {
    uint64_t offset; /* relative to segment_base_offset */
    uint64_t size;
} ly_pte_data_segment;

typedef struct ly_pte_subsegment_offsets {
    bool present;
    uint32_t segment_index;
    const uint64_t *offsets; /* constant_segment: [0] is the placeholder for non-constants */
    size_t n_offsets;
} ly_pte_subsegment_offsets;

typedef struct ly_pte_named_data {
    const char *key;
    uint32_t segment_index;
} ly_pte_named_data;

typedef struct ly_pte_program {
    uint32_t version; /* 0 */
    const ly_pte_plan *execution_plan;
    size_t n_execution_plan;
    const ly_pte_bytes *constant_buffer; /* deprecated: write none */
    size_t n_constant_buffer;
    const ly_pte_bytes *backend_delegate_data; /* inline delegate blobs */
    size_t n_backend_delegate_data;
    /* Decode: as in the file. Encode: must be NULL/0; the encoder writes them from the
     * payloads it is given. */
    const ly_pte_data_segment *segments;
    size_t n_segments;
    ly_pte_subsegment_offsets constant_segment;
    const ly_pte_subsegment_offsets *mutable_data_segments; /* written only when n > 0 */
    size_t n_mutable_data_segments;
    const ly_pte_named_data *named_data; /* written only when n > 0 */
    size_t n_named_data;

    /* ---- Filled by the decoder only (ignored by the encoder) ---- */
    const ly_pte_bytes *segment_data; /* n_segments views into the file */
    bool has_extended_header;
    uint64_t program_size;        /* flatbuffer region incl. header; file size if no header */
    uint64_t segment_base_offset; /* 0 if none */
    uint64_t segment_data_size;
    void *internal_; /* owned file copy and arena; NULL in caller-built programs */
} ly_pte_program;

/* ---- Encoding ----------------------------------------------------------- */

/* One segment's bytes. Its start is aligned to lcm(128, alignment) from the segment base;
 * alignment 0 means 128 (named data: XNNPACK asks for 16 -> 128). */
typedef struct ly_pte_segment_in {
    const uint8_t *data;
    size_t size;
    size_t alignment;
} ly_pte_segment_in;

/* Serialize `p` with `segments` appended in the order given (ExecuTorch's order: [0] the
 * constant segment (may be empty), then delegate blobs, then named data; the indices in
 * p->delegates[].index, p->named_data[].segment_index and p->constant_segment refer to this
 * list). Writes the eh00 header when n_segments > 0 (as ExecuTorch: none without segments).
 * The model is checked the same way the decoder checks it, so every file written decodes.
 * *bytes is malloc'd (free()). */
ly_status ly_pte_encode(const ly_pte_program *p, const ly_pte_segment_in *segments,
                        size_t n_segments, uint8_t **bytes, size_t *size);

/* Pack constant tensors into one constant segment as the emitter does: each tensor padded to
 * LY_PTE_TENSOR_ALIGNMENT; offsets[0] = 0 is the non-constant placeholder, offsets[i+1] the
 * start of tensors[i] (so a tensor with data_buffer_idx i+1 uses it). *data (malloc'd, may be
 * NULL when the total is 0) and *offsets (malloc'd, n_tensors + 1 entries). */
ly_status ly_pte_pack_constants(const ly_pte_bytes *tensors, size_t n_tensors, uint8_t **data,
                                size_t *size, uint64_t **offsets);

/* XNNPACK's named-data key: "<name>_<sha256 hex of bytes>" into out (needs strlen(name)+66). */
ly_status ly_pte_named_key(const char *name, const void *bytes, size_t size, char *out,
                           size_t out_size);

/* ---- Decoding ----------------------------------------------------------- */

/* Parse, verify and validate `bytes` (copied: the caller may free them on return).
 * `what` names the file in messages. Requires a plan named "forward". */
ly_status ly_pte_decode(const uint8_t *bytes, size_t size, const char *what, ly_pte_program **out);
/* Read `path` into memory (no mmap) and decode it. LY_E_NOT_FOUND / LY_E_IO for the file. */
ly_status ly_pte_read_file(const char *path, ly_pte_program **out);
void ly_pte_program_free(ly_pte_program *p);

/* ---- Queries on a decoded (or caller-built) program ----------------------- */

const ly_pte_plan *ly_pte_find_plan(const ly_pte_program *p, const char *name);
/* Bytes of a tensor (product of sizes x element size); LY_E_FORMAT on overflow/bad type. */
ly_status ly_pte_tensor_nbytes(const ly_pte_tensor *t, uint64_t *nbytes);
static inline uint64_t ly_pte_memory_offset(const ly_pte_allocation *a)
{
    return (uint64_t)a->memory_offset_low | ((uint64_t)a->memory_offset_high << 32);
}
/* A decoded segment's bytes. */
ly_status ly_pte_segment(const ly_pte_program *p, uint32_t index, ly_pte_bytes *out);
/* A delegate's processed blob (inline or segment). */
ly_status ly_pte_delegate_blob(const ly_pte_program *p, const ly_pte_delegate *d,
                               ly_pte_bytes *out);
/* The named-data segment for `key`; LY_E_NOT_FOUND naming the key when absent. */
ly_status ly_pte_named_data_find(const ly_pte_program *p, const char *key, ly_pte_bytes *out);
/* A constant tensor's bytes (data_buffer_idx > 0, no allocation_info), already bounds-checked
 * by the decoder. */
ly_status ly_pte_constant_data(const ly_pte_program *p, const ly_pte_tensor *t, ly_pte_bytes *out);

/* ==== XNNPACK delegate payload ============================================ */

#define LY_XNN_HEADER_MAGIC "XH00"
#define LY_XNN_FILE_IDENTIFIER "XN01" /* written; XN00 and XN01 read */
enum {
    LY_XNN_HEADER_LENGTH = 30,
    LY_XNN_HEADER_PADDED = 32,
};
#define LY_XNN_INVALID_ID 0xFFFFFFFFu /* XNN_INVALID_VALUE_ID: internal value / no bias */
#define LY_XNN_FLAG_EXTERNAL_INPUT 1u
#define LY_XNN_FLAG_EXTERNAL_OUTPUT 2u

typedef enum ly_xnn_datatype {
    LY_XNN_DT_INVALID = 0,
    LY_XNN_DT_FP32 = 1,
    LY_XNN_DT_FP16 = 2,
    LY_XNN_DT_QINT8 = 3,
    LY_XNN_DT_QUINT8 = 4,
    LY_XNN_DT_QINT32 = 5,
    LY_XNN_DT_QCINT8 = 6,
    LY_XNN_DT_QCINT32 = 7,
    LY_XNN_DT_QCINT4 = 8,
    LY_XNN_DT_QDINT8 = 9,
    LY_XNN_DT_QBINT4 = 10,
    LY_XNN_DT_QPINT8 = 11,
    LY_XNN_DT_INT32 = 12,
    LY_XNN_DT_PFP32 = 13,
    LY_XNN_DT_BF16 = 14,
} ly_xnn_datatype;

typedef struct ly_xnn_tensor_value {
    int16_t datatype; /* ly_xnn_datatype */
    uint32_t num_dims;
    const uint32_t *dims; /* n_dims == num_dims (checked by the decoder) */
    size_t n_dims;
    uint32_t constant_buffer_idx; /* 0: not constant; else index into constant_data */
    uint32_t external_id;         /* LY_XNN_INVALID_ID for internal values */
    uint32_t flags;               /* LY_XNN_FLAG_EXTERNAL_* */
    uint32_t id_out;              /* == index in xvalues */
    int16_t dq_datatype;          /* runtime schema (XN00) slot; 0 when absent; never written */
} ly_xnn_tensor_value;

typedef enum ly_xnn_quant_type {
    LY_XNN_QUANT_NONE = 0,
    LY_XNN_PER_CHANNEL_QUANT = 1,
    LY_XNN_PER_TENSOR_QUANT = 2,
    LY_XNN_PER_TOKEN_DYNAMIC_QUANT = 3,
    LY_XNN_PER_CHANNEL_GROUP_QUANT = 4,
} ly_xnn_quant_type;

typedef struct ly_xnn_quant_params {
    ly_xnn_quant_type type;
    const float *scale; /* per-channel, per-channel-group */
    size_t n_scale;
    int32_t channel_dim;        /* per-channel, per-channel-group */
    int32_t group_size;         /* per-channel-group */
    const uint16_t *scale_bf16; /* per-channel-group */
    size_t n_scale_bf16;
    float tensor_scale;        /* per-tensor */
    int32_t zero_point;        /* per-tensor */
    int32_t num_nonbatch_dims; /* per-token dynamic */
} ly_xnn_quant_params;

typedef enum ly_xnn_value_type {
    LY_XNN_VALUE_NONE = 0, /* refused */
    LY_XNN_TENSOR_VALUE = 1,
    LY_XNN_QUANTIZED_TENSOR_VALUE = 2,
} ly_xnn_value_type;

typedef struct ly_xnn_value {
    ly_xnn_value_type type;
    ly_xnn_tensor_value tensor; /* both kinds */
    ly_xnn_quant_params quant;  /* quantized only */
} ly_xnn_value;

/* XNodeUnion tags (ET-1.2; fixed). */
typedef enum ly_xnn_node_type {
    LY_XNN_NODE_NONE = 0,
    LY_XNN_ADD = 1,
    LY_XNN_FULLY_CONNECTED = 2,
    LY_XNN_SOFTMAX = 3,
    LY_XNN_SIGMOID = 4,
    LY_XNN_STATIC_TRANSPOSE = 5,
    LY_XNN_CLAMP = 6,
    LY_XNN_CONV2D = 7,
    LY_XNN_DIV = 8,
    LY_XNN_STATIC_RESIZE_BILINEAR_2D = 9,
    LY_XNN_STATIC_CONSTANT_PAD = 10,
    LY_XNN_AVG_POOLING_2D = 11,
    LY_XNN_MINIMUM = 12,
    LY_XNN_DEPTHWISE_CONV2D = 13,
    LY_XNN_MAX_POOLING_2D = 14,
    LY_XNN_MULTIPLY = 15,
    LY_XNN_SUBTRACT = 16,
    LY_XNN_FLOOR = 17,
    LY_XNN_CONVERT = 18,
    LY_XNN_GLOBAL_AVG_POOLING_2D = 19,
    LY_XNN_STATIC_RESHAPE = 20,
    LY_XNN_ARG_MAX_POOLING_2D = 21,
    LY_XNN_SQUARE_ROOT = 22,
    LY_XNN_CEILING = 23,
    LY_XNN_HARDSWISH = 24,
    LY_XNN_LEAKY_RELU = 25,
    LY_XNN_MAXIMUM = 26,
    LY_XNN_NEGATE = 27,
    LY_XNN_SQUARE = 28,
    LY_XNN_ELU = 29,
    LY_XNN_ABS = 30,
    LY_XNN_PRELU = 31,
    LY_XNN_CONCATENATE2 = 32,
    LY_XNN_CONCATENATE3 = 33,
    LY_XNN_CONCATENATE4 = 34,
    LY_XNN_STATIC_SLICE = 35,
    LY_XNN_SCALED_DOT_PRODUCT_ATTENTION = 36,
    LY_XNN_BATCH_MATRIX_MULTIPLY = 37,
    LY_XNN_CONCATENATE5 = 38,
    LY_XNN_CONV_TRANSPOSE_2D = 39,
    LY_XNN_RECIPROCAL_SQUARE_ROOT = 40,
    LY_XNN_LOG = 41,
    LY_XNN_GELU = 42,
    LY_XNN_TANH = 43,
    LY_XNN_EXP = 44,
    LY_XNN_SIN = 45,
    LY_XNN_COPY = 46,
    LY_XNN_COS = 47,
    LY_XNN_NODE_TYPE_COUNT = 48,
} ly_xnn_node_type;

/* The table each node type is stored as; selects the member of ly_xnn_node.u. */
typedef enum ly_xnn_node_kind {
    LY_XNN_KIND_INVALID = 0,
    LY_XNN_KIND_1X1,             /* u.n1x1 */
    LY_XNN_KIND_2X1,             /* u.n2x1 */
    LY_XNN_KIND_CONV,            /* u.conv: Conv2d, DepthwiseConv2d, ConvTranspose2d */
    LY_XNN_KIND_POOLING,         /* u.pooling: Avg/MaxPooling2d */
    LY_XNN_KIND_CAT,             /* u.cat: Concatenate2..5 */
    LY_XNN_KIND_TRANSPOSE,       /* u.transpose */
    LY_XNN_KIND_RESIZE_BILINEAR, /* u.resize */
    LY_XNN_KIND_CONSTANT_PAD,    /* u.pad */
    LY_XNN_KIND_RESHAPE,         /* u.reshape */
    LY_XNN_KIND_SLICE,           /* u.slice */
    LY_XNN_KIND_FULLY_CONNECTED, /* u.fc */
    LY_XNN_KIND_LEAKY_RELU,      /* u.leaky_relu */
    LY_XNN_KIND_ELU,             /* u.elu */
    LY_XNN_KIND_SDPA,            /* u.sdpa */
    LY_XNN_KIND_ARG_MAX_POOLING, /* u.argmax_pooling */
} ly_xnn_node_kind;

ly_xnn_node_kind ly_xnn_node_kind_of(int node_type); /* INVALID for unknown tags */
const char *ly_xnn_node_name(int node_type);         /* "XNNConv2d"; "?" if unknown */

typedef struct ly_xnn_node {
    ly_xnn_node_type type;
    uint32_t debug_handle;
    bool has_output_min_max; /* fused clamp */
    float output_min, output_max;
    union {
        struct {
            uint32_t input_id, output_id, flags;
        } n1x1;
        struct {
            uint32_t input1_id, input2_id, output_id, flags;
        } n2x1;
        struct {
            uint32_t padding_top, padding_right, padding_bottom, padding_left;
            uint32_t kernel_height, kernel_width, subsampling_height, subsampling_width;
            uint32_t dilation_height, dilation_width;
            uint32_t group_input_channels, group_output_channels, groups;
            uint32_t adjustment_height, adjustment_width;
            uint32_t input1_id, filter_id, bias_id /* LY_XNN_INVALID_ID: none */, output_id, flags;
        } conv;
        struct {
            uint32_t padding_top, padding_right, padding_bottom, padding_left;
            uint32_t pooling_height, pooling_width, stride_height, stride_width;
            uint32_t dilation_height, dilation_width;
            uint32_t input_id, output_id, flags;
        } pooling;
        struct { /* Concatenate2..5 use input1..N; the rest are ignored (0 when decoded) */
            uint32_t axis, input1_id, input2_id, input3_id, input4_id, output_id, flags, input5_id;
        } cat;
        struct {
            uint32_t num_dims;
            const uint32_t *perm;
            size_t n_perm;
            uint32_t input_id, output_id, flags;
        } transpose;
        struct {
            uint32_t new_height, new_width, input_id, output_id, flags;
        } resize;
        struct {
            const uint32_t *pre_paddings;
            size_t n_pre_paddings;
            const uint32_t *post_paddings;
            size_t n_post_paddings;
            float padding_value;
            uint32_t input_id, output_id, flags;
        } pad;
        struct {
            uint32_t num_dims;
            const uint32_t *new_shape;
            size_t n_new_shape;
            uint32_t input_id, output_id, flags;
        } reshape;
        struct {
            uint32_t num_dims;
            const uint32_t *offsets;
            size_t n_offsets;
            const uint32_t *sizes;
            size_t n_sizes;
            uint32_t input_id, output_id, flags;
        } slice;
        struct {
            uint32_t input1_id, filter_id, bias_id, output_id, flags;
        } fc;
        struct {
            float negative_slope;
            uint32_t input_id, output_id, flags;
        } leaky_relu;
        struct {
            float alpha;
            uint32_t input_id, output_id, flags;
        } elu;
        struct {
            uint32_t query_id, key_id, value_id, scale_id, mask_id, output_id, flags;
        } sdpa;
        struct {
            uint32_t padding_top, padding_right, padding_bottom, padding_left;
            uint32_t pooling_height, pooling_width;
            uint32_t input_id, output_value_id, output_index_id, flags;
        } argmax_pooling;
    } u;
} ly_xnn_node;

typedef struct ly_xnn_constant_data {
    uint64_t offset; /* UINT64_MAX when named_key is set; else into the inline area */
    uint64_t size;
    const char *named_key; /* NULL when absent: bytes are inline at offset */
} ly_xnn_constant_data;

typedef struct ly_xnn_graph {
    const char *version; /* "0" */
    const ly_xnn_node *xnodes;
    size_t n_xnodes;
    const ly_xnn_value *xvalues;
    size_t n_xvalues;
    uint32_t num_externs;
    const uint32_t *input_ids;
    size_t n_input_ids;
    const uint32_t *output_ids;
    size_t n_output_ids;
    const ly_xnn_constant_data *constant_data; /* [0] is the {0,0} placeholder */
    size_t n_constant_data;

    /* ---- Filled by the decoder only ---- */
    bool has_header;            /* XH00 present */
    char identifier[5];         /* "XN00" or "XN01" */
    ly_pte_bytes constant_area; /* inline constant bytes (view into the blob) */
    void *internal_;
} ly_xnn_graph;

/* XH00 header + XN01 flatbuffer (padded to 16) + `constant_area` bytes. The graph is
 * structurally checked as ly_xnn_decode checks it. *bytes is malloc'd. */
ly_status ly_xnn_encode(const ly_xnn_graph *g, const uint8_t *constant_area, size_t constant_size,
                        uint8_t **bytes, size_t *size);
/* Parse and verify a delegate blob (with or without XH00). Strings and constant_area point
 * into `blob`, which must outlive the graph; arrays are copies. Checks: header bounds, XN00/XN01
 * identifier, flatbuffer verification, every node's value ids < n_xvalues (bias/optional ids may
 * be LY_XNN_INVALID_ID), id_out == index, num_dims == len(dims), external ids < num_externs,
 * constant_buffer_idx < n_constant_data, inline constant ranges inside the constant area. */
ly_status ly_xnn_decode(const uint8_t *blob, size_t size, const char *what, ly_xnn_graph **out);
void ly_xnn_graph_free(ly_xnn_graph *g);

#endif
