/* SPDX-License-Identifier: MIT */
/*
 * Running ExecuTorch programs (internal): the method executor (values,
 * planned memory, KernelCalls on our portable kernels, DelegateCalls) and the
 * XNNPACK delegate it calls, which lives in xnnpack/ so that builds without
 * XNNPACK drop it (ly_et_xnnpack_available() is false there).
 */
#ifndef LY_BACKENDS_EXECUTORCH_ET_RUNTIME_H
#define LY_BACKENDS_EXECUTORCH_ET_RUNTIME_H

#include "core/core.h"
#include "graph/graph.h"
#include "pte/pte.h"

/* ---- the XNNPACK delegate --------------------------------------------------- */

typedef struct ly_et_xnnpack ly_et_xnnpack;

/* Whether this build carries the XNNPACK delegate (XnnpackBackend). */
bool ly_et_xnnpack_available(void);

/* Build a delegate instance from its processed blob (XH00 + XNNGraph):
 * every node checked, weights resolved through the program's named data or
 * the blob's constant area and packed, memory planned. `what` names the
 * delegate in messages. The program must outlive the instance. */
ly_status ly_et_xnnpack_init(const ly_pte_program *program, const ly_pte_bytes *blob,
                             const char *what, ly_et_xnnpack **out);
/* Number of externals (DelegateCall args it reads). */
size_t ly_et_xnnpack_num_externs(const ly_et_xnnpack *d);
/* Dims the graph declares for external `id` (NCHW/contiguous order). */
ly_status ly_et_xnnpack_extern_dims(const ly_et_xnnpack *d, size_t id, int *ndim, int64_t *dims,
                                    bool *is_output);
/* Run with args[external_id] (f32, contiguous; outputs written). Buffers
 * must have 16 readable bytes past their end (XNNPACK reads ahead). */
ly_status ly_et_xnnpack_execute(ly_et_xnnpack *d, ly_tensor *const *args, size_t n_args,
                                int threads);
void ly_et_xnnpack_free(ly_et_xnnpack *d);
/* The delegate's pool for `threads` as a ly_parallel_runner (into *runner),
 * so that a method's portable kernels run on the workers its delegates use;
 * false where there is none (one thread, or no XNNPACK). */
bool ly_et_xnnpack_runner(int threads, ly_parallel_runner *runner);
/* After init and before the first execute: the instance as one of our
 * graphs (its activations laid in `arena`, shared by the other delegates of
 * one method, which run one at a time; NULL: its own), or on XNNPACK's
 * operators where a node has no op of ours. Nothing to do for an instance a
 * method merged (ly_et_xnnpack_merged) or one on operators already. */
ly_status ly_et_xnnpack_finish(ly_et_xnnpack *d, ly_graph_arena *arena);
/* Before finish: the instance's nodes appended to `g`, a graph in which a
 * method runs several of its calls: external e reads bound[e] (an input) or
 * leaves its value in produced[e] (an output); `tag` numbers its node names.
 * LY_E_DECLINED where a node has no op of ours (or it is finished). */
ly_status ly_et_xnnpack_append(ly_et_xnnpack *d, ly_graph *g, int tag, const ly_graph_value *bound,
                               ly_graph_value *produced);
/* Once a method runs the instance inside such a graph: its decoded nodes go
 * and it no longer runs alone. */
void ly_et_xnnpack_merged(ly_et_xnnpack *d);
/* Whether the instance runs XNNPACK operators and our loops (else it runs as
 * one of our graphs, on the providers and their own threads). */
bool ly_et_xnnpack_runs_operators(const ly_et_xnnpack *d);

/* ---- the method -------------------------------------------------------------- */

typedef struct ly_et_method ly_et_method;

/* Prepare "forward" of a decoded (validated) program: values, planned
 * buffers, constants, operators resolved against our portable kernels,
 * delegates initialised. Everything that can fail on a bad program fails
 * here, before anything runs. The program must outlive the method. */
ly_status ly_et_method_load(const ly_pte_program *program, const char *what, ly_et_method **out);
void ly_et_method_free(ly_et_method *m);

size_t ly_et_method_num_inputs(const ly_et_method *m);
size_t ly_et_method_num_outputs(const ly_et_method *m);
/* Input i's declared shape (f32 tensors only). */
ly_status ly_et_method_input_shape(const ly_et_method *m, size_t i, ly_tensor *shape);
/* Copy inputs into the method (set_input), run the chain, and give views of
 * the outputs (valid until the next execute or free). */
ly_status ly_et_method_execute(ly_et_method *m, const ly_tensor *inputs, size_t n_inputs,
                               int threads);
ly_status ly_et_method_output(const ly_et_method *m, size_t i, ly_tensor *view);
/* Instruction counts, for reports and tests. */
void ly_et_method_counts(const ly_et_method *m, size_t *delegate_calls, size_t *kernel_calls);
/* How many of its calls run inside graphs that merge a run of delegate and
 * portable kernel calls (the rest run one by one). */
size_t ly_et_method_merged_calls(const ly_et_method *m);
/* How many portable forms of ms_deform_attn run as the op (tests). */
size_t ly_et_method_recognised_msda(const ly_et_method *m);
/* How many tokens-first attentions run without their transposes (tests). */
size_t ly_et_method_folded_sdpa(const ly_et_method *m);
/* How many of its delegates run XNNPACK operators (the others: our graphs). */
size_t ly_et_method_operator_delegates(const ly_et_method *m);

#endif
