/* SPDX-License-Identifier: MIT */
/*
 * The parity harness (see check.h): every op's case set, from its folder,
 * through one runner that runs each case on the reference and on every
 * selected implementation and compares them.
 */
#include "kernels/check.h"

#include "core/core.h"
#include "core/layout.h"
#include "kernels/registry_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note_error(ly_check_result *r, const char *fmt, ...) LY_PRINTF(2, 3);
static void note_error(ly_check_result *r, const char *fmt, ...)
{
    if (r->errors++ > 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first_error, sizeof r->first_error, fmt, ap);
    va_end(ap);
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* |a - b| where NaN matches only NaN and an infinity only itself. */
static double abs_diff(float a, float b)
{
    if (isnan(a) && isnan(b)) return 0.0;
    if (isnan(a) || isnan(b)) return INFINITY;
    if (a == b) return 0.0;
    if (isinf(a) || isinf(b)) return INFINITY;
    return fabs((double)a - (double)b);
}

/* ---- outputs with guard bytes either side -------------------------------------- */

typedef struct output_set {
    int n;
    ly_tensor t[LY_KERNEL_MAX_OUTPUTS];
    void *alloc[LY_KERNEL_MAX_OUTPUTS];
    size_t bytes[LY_KERNEL_MAX_OUTPUTS];
} output_set;

static void outputs_free(output_set *o)
{
    for (int i = 0; i < LY_KERNEL_MAX_OUTPUTS; i++)
        free(o->alloc[i]);
    memset(o, 0, sizeof *o);
}

/* At the case's offset (elements past a 64-byte boundary). */
static bool outputs_alloc(output_set *o, const ly_tensor *shapes, int n, int offset)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    for (int i = 0; i < n; i++) {
        o->t[i] = shapes[i];
        size_t elem = ly_dtype_size(shapes[i].dtype);
        o->bytes[i] = (size_t)ly_tensor_numel(&shapes[i]) * elem;
        o->t[i].data = ly_check_alloc(o->bytes[i], (size_t)offset * elem, &o->alloc[i]);
        if (!o->t[i].data) return false;
    }
    return true;
}

enum { GUARD = 0xCC };

/* Each run starts from its own canary (reference and implementation differ), so
 * an element nobody wrote can never compare equal; the guard bytes either side
 * catch writes outside it. */
static void outputs_fill(output_set *o, uint32_t canary)
{
    for (int i = 0; i < o->n; i++) {
        uint8_t *p = o->t[i].data;
        size_t elem = ly_dtype_size(o->t[i].dtype);
        for (size_t b = 0; b < o->bytes[i]; b += elem) {
            if (elem == 4)
                memcpy(p + b, &canary, 4);
            else
                memset(p + b, (int)(canary & 0xFF), elem);
        }
        memset(p - LY_CHECK_GUARD_BYTES, GUARD, LY_CHECK_GUARD_BYTES);
        memset(p + o->bytes[i], GUARD, LY_CHECK_GUARD_BYTES);
    }
}

/* The first guard byte written: counted from the output's end (>= 0), or
 * backwards from its start (< 0); INT64_MIN: none. */
static int64_t outputs_guard_broken(const output_set *o, int *which)
{
    for (int i = 0; i < o->n; i++) {
        const uint8_t *p = o->t[i].data;
        *which = i;
        for (int b = 0; b < LY_CHECK_GUARD_BYTES; b++)
            if (p[o->bytes[i] + (size_t)b] != GUARD) return b;
        for (int b = 0; b < LY_CHECK_GUARD_BYTES; b++)
            if (p[-1 - b] != GUARD) return -1 - b;
    }
    return INT64_MIN;
}

static void note_guard(ly_check_result *r, const char *who, int out, int64_t guard,
                       const char *name, const char *how)
{
    if (guard >= 0)
        note_error(r, "%swrote past the end of out[%d] (guard byte %" PRId64 ") on case '%s'%s",
                   who, out, guard, name, how);
    else
        note_error(r, "%swrote before the start of out[%d] (guard byte %" PRId64 ") on case '%s'%s",
                   who, out, guard, name, how);
}

static const uint32_t REFERENCE_CANARY = 0x7FB0B0B0u, IMPL_CANARY = 0x7FBADBADu;

/* ---- the run ------------------------------------------------------------------------ */

typedef struct impl_state {
    char name[64];
    const ly_impl *impl; /* NULL when skipped */
    ly_check_result result;
} impl_state;

typedef struct check_run {
    ly_op op;
    const ly_op_def *def;
    const ly_check_options *opt;
    impl_state *impls;
    int n_impls;
    int64_t total, done;
} check_run;

typedef struct listing {
    impl_state *items;
    int n, cap;
    const ly_check_options *opt;
    bool out_of_memory;
} listing;

static bool impl_selected(const ly_check_options *opt, const char *name)
{
    if (opt->impl) return strcmp(opt->impl, name) == 0;
    return strcmp(name, "reference") != 0;
}

static void on_listed(const char *slot, const char *impl, bool eligible, const char *why_not,
                      void *user)
{
    listing *l = user;
    if (!impl_selected(l->opt, impl)) return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        impl_state *grown = realloc(l->items, (size_t)cap * sizeof *grown);
        if (!grown) {
            l->out_of_memory = true;
            return;
        }
        l->items = grown;
        l->cap = cap;
    }
    impl_state *s = &l->items[l->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", impl);
    s->result.slot = slot;
    if (!eligible) {
        s->result.skipped = true;
        snprintf(s->result.why_skipped, sizeof s->result.why_skipped, "%s", why_not);
    }
}

static void result_rule(ly_check_result *r, const ly_op_def *def)
{
    r->exact = def->parity == LY_PARITY_EXACT;
    r->relative = def->parity == LY_PARITY_TOLERANCE;
    r->tolerance = def->tolerance;
}

/* The registry entry behind a listed name (resolved under no selection filter:
 * listing already applied it). */
static const ly_impl *find_listed(ly_op op, const char *name)
{
    ly_selection all;
    snprintf(all.text, sizeof all.text, "%s", name);
    const ly_impl *impl = NULL;
    /* With the selection set to its own name, select() returns it (or the
     * reference, for an implementation that declines every call shape). */
    if (ly_kernel_select(op, &all, NULL, &impl) != LY_OK) return NULL;
    return strcmp(ly_impl_name(impl), name) == 0 ? impl : NULL;
}

/* Lists the op's implementations the options select (skipped ones with their
 * reason). */
static ly_status run_begin(ly_op op, const ly_check_options *opt, int64_t total_cases,
                           check_run **out, int *n_matched)
{
    *out = NULL;
    const ly_op_def *def = ly_op_def_of(op);
    check_run *run = calloc(1, sizeof *run);
    if (!run) return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
    listing l = {.opt = opt};
    ly_status st = ly_kernel_list(def->name, on_listed, &l);
    if (st == LY_OK && l.out_of_memory)
        st = ly_set_error(LY_E_NO_MEMORY, "parity check: %s: out of memory", def->name);
    if (st != LY_OK) {
        free(l.items);
        free(run);
        return st;
    }
    for (int i = 0; i < l.n; i++) {
        impl_state *s = &l.items[i];
        s->result.impl = s->name;
        result_rule(&s->result, def);
        if (!s->result.skipped) s->impl = find_listed(op, s->name);
        if (!s->result.skipped && !s->impl) {
            s->result.skipped = true;
            snprintf(s->result.why_skipped, sizeof s->result.why_skipped,
                     "not eligible on this machine");
        }
    }
    ly_clear_error();
    run->op = op;
    run->def = def;
    run->opt = opt;
    run->impls = l.items;
    run->n_impls = l.n;
    run->total = total_cases;
    *n_matched += l.n;
    *out = run;
    return LY_OK;
}

/* Whether any selected implementation can run here. */
static bool run_active(const check_run *run)
{
    for (int i = 0; i < run->n_impls; i++)
        if (!run->impls[i].result.skipped) return true;
    return false;
}

/* Reports every result, frees the run. */
static void run_end(check_run *run, ly_check_report_fn report, void *user)
{
    if (!run) return;
    for (int i = 0; report && i < run->n_impls; i++)
        report(&run->impls[i].result, user);
    free(run->impls);
    free(run);
}

/* ---- comparing ----------------------------------------------------------------------- */

typedef struct case_ctx {
    ly_op op;
    const ly_check_case *c;
    const ly_case_set *set;
    const char *how; /* which run */
} case_ctx;

static void shape_text(const ly_tensor *t, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < t->ndim && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, i ? "," : "", t->shape[i]);
    if (len < size) snprintf(buf + len, size - len, "]");
}

static void record_mismatch(ly_check_result *r, const case_ctx *c, int out_index,
                            const ly_tensor *out, int64_t index, uint32_t ref_bits,
                            uint32_t impl_bits, double tolerance)
{
    r->mismatches++;
    if (r->n_shown >= LY_CHECK_MAX_SHOWN) return;
    ly_check_mismatch *m = &r->shown[r->n_shown++];
    memset(m, 0, sizeof *m);
    snprintf(m->case_name, sizeof m->case_name, "%s", c->c->name);
    /* " (what)" as the errors say it, without the parentheses */
    size_t len = c->how ? strlen(c->how) : 0;
    if (len > 3) snprintf(m->run, sizeof m->run, "%.*s", (int)(len - 3), c->how + 2);
    shape_text(out, m->shape, sizeof m->shape);
    m->output = out_index;
    m->index = index;
    if (c->set->describe)
        c->set->describe(c->op, c->c, out_index, out, index, m->inputs, sizeof m->inputs);
    else if (tolerance > 0.0)
        snprintf(m->inputs, sizeof m->inputs, "tolerance %.3g", tolerance);
    m->reference_bits = ref_bits;
    m->impl_bits = impl_bits;
    m->reference = bits_f32(ref_bits);
    m->impl = bits_f32(impl_bits);
}

static void compare_outputs(ly_check_result *r, const case_ctx *c, const output_set *ref,
                            const output_set *got)
{
    for (int o = 0; o < ref->n; o++) {
        int64_t n = ly_tensor_numel(&ref->t[o]);
        r->elements += n;
        if (ref->t[o].dtype != LY_F32) { /* indices, masks, codes: exact always */
            size_t elem = ly_dtype_size(ref->t[o].dtype);
            for (int64_t i = 0; i < n; i++) {
                const uint8_t *a = (const uint8_t *)ref->t[o].data + (size_t)i * elem;
                const uint8_t *b = (const uint8_t *)got->t[o].data + (size_t)i * elem;
                if (memcmp(a, b, elem) != 0) {
                    r->bit_differences++;
                    record_mismatch(r, c, o, &ref->t[o], i, a[0], b[0], 0.0);
                }
            }
            continue;
        }
        const uint32_t *a = ref->t[o].data, *b = got->t[o].data;
        double tolerance = r->tolerance;
        if (r->relative) {
            double scale = 1.0;
            for (int64_t i = 0; i < n; i++) {
                double v = fabs((double)bits_f32(a[i]));
                if (v > scale && isfinite(v)) scale = v;
            }
            tolerance *= scale;
        }
        for (int64_t i = 0; i < n; i++) {
            if (a[i] == b[i]) continue;
            r->bit_differences++;
            double diff = abs_diff(bits_f32(a[i]), bits_f32(b[i]));
            if (diff > r->max_abs_diff) r->max_abs_diff = diff;
            bool ok = !r->exact && diff <= tolerance;
            if (!ok) record_mismatch(r, c, o, &ref->t[o], i, a[i], b[i], tolerance);
        }
    }
}

/* ---- inputs: snapshots, to catch writes --------------------------------------------- */

typedef struct snapshot {
    void *copy[LY_KERNEL_MAX_INPUTS];
    size_t bytes[LY_KERNEL_MAX_INPUTS];
} snapshot;

static bool snapshot_take(snapshot *s, const ly_kernel_call *call)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++) {
        const ly_tensor *t = call->in[i];
        if (!t || !t->data) continue;
        s->bytes[i] = (size_t)ly_tensor_numel(t) * ly_dtype_size(t->dtype);
        s->copy[i] = malloc(s->bytes[i] + 1);
        if (!s->copy[i]) return false;
        memcpy(s->copy[i], t->data, s->bytes[i]);
    }
    return true;
}

static int snapshot_changed(const snapshot *s, const ly_kernel_call *call)
{
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        if (s->copy[i] && memcmp(call->in[i]->data, s->copy[i], s->bytes[i]) != 0) return i;
    return -1;
}

static void snapshot_restore(const snapshot *s, const ly_kernel_call *call)
{
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        if (s->copy[i]) memcpy(call->in[i]->data, s->copy[i], s->bytes[i]);
}

static void snapshot_free(snapshot *s)
{
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        free(s->copy[i]);
}

static bool is_decline(ly_status st)
{
    return st == LY_E_DECLINED || st == LY_E_UNAVAILABLE;
}

/* After an implementation's run into `got`: inputs untouched, guards intact, then
 * the values. */
static void verify_run(ly_check_result *r, const case_ctx *c, const snapshot *snap,
                       const ly_kernel_call *call, const output_set *ref, const output_set *got,
                       const char *how)
{
    r->cases++;
    int modified = snapshot_changed(snap, call);
    if (modified >= 0) {
        note_error(r, "modified in[%d] on case '%s'%s", modified, c->c->name, how);
        snapshot_restore(snap, call);
    }
    int guard_out = 0;
    int64_t guard = outputs_guard_broken(got, &guard_out);
    if (guard != INT64_MIN) note_guard(r, "", guard_out, guard, c->c->name, how);
    case_ctx cc = *c;
    cc.how = how;
    compare_outputs(r, &cc, ref, got);
}

/* ---- the stateful form, with every layout it offers ---------------------------------- */

/* The layout combinations worth a run: plain; each input blocked alone where
 * offered; the output blocked; everything blocked. Returns how many were written. */
static int layout_plans(const ly_kernel_layouts *lay, const ly_kernel_call *call, uint32_t constant,
                        ly_kernel_prepare_info plans[8])
{
    int n = 0;
    ly_kernel_prepare_info plain = {0};
    plans[n++] = plain;
    ly_layout want = lay->preferred != LY_LAYOUT_PLAIN ? lay->preferred : LY_LAYOUT_NCHW8C;
    ly_layout options[2] = {want, want == LY_LAYOUT_NCHW8C ? LY_LAYOUT_NCHW16C : LY_LAYOUT_NCHW8C};
    for (int k = 0; k < 2; k++) {
        ly_layout l = options[k];
        uint32_t bit = LY_LAYOUT_BIT(l);
        bool out_ok = (lay->out[0] & bit) && ly_layout_fits(l, call->out[0]);
        bool in_ok = (lay->in[0] & bit) && ly_layout_fits(l, call->in[0]) && !(constant & 1u);
        ly_kernel_prepare_info p = {0};
        if (in_ok && n < 8) {
            p.in_layout[0] = l;
            plans[n++] = p;
        }
        if (out_ok && n < 8) {
            p = (ly_kernel_prepare_info){0};
            p.out_layout[0] = l;
            for (int i = 1; i < LY_KERNEL_MAX_INPUTS; i++)
                if (call->in[i] && (lay->tied & (1u << i))) p.in_layout[i] = l;
            plans[n++] = p;
        }
        if (in_ok && out_ok && n < 8) {
            p.in_layout[0] = l;
            plans[n++] = p;
        }
    }
    return n;
}

/* What a state says it holds it must give back bit for bit (the graph frees
 * the originals' pages on that promise). */
static ly_status check_restores(const ly_kernel_stateful *sf, void *state,
                                const ly_kernel_call *call, uint32_t constant)
{
    uint32_t held = sf->held_constants ? sf->held_constants(state) & constant : 0;
    if (held && !sf->restore_constant)
        return ly_set_error(LY_E_INTERNAL, "holds constants but cannot restore them");
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++) {
        if (!(held & (1u << i)) || !call->in[i]) continue;
        size_t bytes = (size_t)ly_tensor_numel(call->in[i]) * ly_dtype_size(call->in[i]->dtype);
        void *back = malloc(bytes + 1);
        if (!back) return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
        memset(back, 0xA5, bytes);
        ly_status st = sf->restore_constant(state, i, back);
        if (st == LY_OK && memcmp(back, call->in[i]->data, bytes) != 0)
            st = ly_set_error(LY_E_INTERNAL, "constant input %d restored with other bits", i);
        free(back);
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

/* Run `impl` on `call` as `plan` lays it out, through its stateful form or
 * (an element-wise op on blocked maps) its plain function: blocked inputs are
 * reordered copies, blocked outputs are reordered back into `got`. */
static ly_status run_laid_out(const char *slot, const ly_impl *impl, bool stateful,
                              const ly_kernel_call *call, uint32_t constant,
                              ly_kernel_prepare_info plan, output_set *got)
{
    const ly_kernel_stateful *sf = ly_impl_stateful(impl);
    ly_kernel_call c = *call;
    ly_tensor in_copy[LY_KERNEL_MAX_INPUTS], out_copy[LY_KERNEL_MAX_OUTPUTS];
    float *buffers[LY_KERNEL_MAX_INPUTS + LY_KERNEL_MAX_OUTPUTS] = {0};
    ly_status st = LY_OK;
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS && st == LY_OK; i++) {
        if (!call->in[i] || plan.in_layout[i] == LY_LAYOUT_PLAIN) continue;
        in_copy[i] = *call->in[i];
        buffers[i] = malloc((size_t)ly_tensor_numel(&in_copy[i]) * sizeof(float) + 64);
        if (!buffers[i])
            st = ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
        else {
            ly_layout_reorder(call->in[i]->data, LY_LAYOUT_PLAIN, buffers[i], plan.in_layout[i],
                              in_copy[i].shape);
            in_copy[i].data = buffers[i];
            c.in[i] = &in_copy[i];
        }
    }
    for (int i = 0; i < got->n && st == LY_OK; i++) {
        if (plan.out_layout[i] == LY_LAYOUT_PLAIN) continue;
        out_copy[i] = got->t[i];
        float *b = malloc((size_t)ly_tensor_numel(&out_copy[i]) * sizeof(float) + 64);
        buffers[LY_KERNEL_MAX_INPUTS + i] = b;
        if (!b)
            st = ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
        else {
            out_copy[i].data = b;
            c.out[i] = &out_copy[i];
        }
    }
    plan.constant_inputs = constant;
    plan.threads = ly_threads_resolve(call->threads);
    void *state = NULL;
    if (st == LY_OK && !stateful) st = ly_kernel_run_impl(slot, ly_impl_name(impl), &c);
    if (st == LY_OK && stateful) st = sf->prepare(&c, &plan, &state);
    if (st == LY_OK && stateful) {
        st = sf->run(state, &c);
        if (st == LY_OK) st = check_restores(sf, state, &c, constant);
        sf->release(state);
    }
    for (int i = 0; i < got->n && st == LY_OK; i++)
        if (plan.out_layout[i] != LY_LAYOUT_PLAIN)
            ly_layout_reorder(out_copy[i].data, plan.out_layout[i], got->t[i].data, LY_LAYOUT_PLAIN,
                              got->t[i].shape);
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    return st;
}

static const char *layout_text(const ly_kernel_prepare_info *p, char *buf, size_t size)
{
    static const char *const names[] = {"plain", "nChw8c", "nChw16c"};
    snprintf(buf, size, " (prepared: in %s, out %s)", names[p->in_layout[0]],
             names[p->out_layout[0]]);
    return buf;
}

/* ---- more runs of a case: in place, element-wise on blocked maps, repeated ----------- */

static bool same_shape(const ly_tensor *a, const ly_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* The inputs out[0] may be written over (bit k: in[k]): an element-wise op's
 * every input of out's shape, and any the options ask for. */
static uint32_t aliasable(const check_run *run, const ly_kernel_call *call, int n_out)
{
    uint32_t want = run->opt->alias_inputs, bits = 0;
    if (run->def->layouts == LY_LAYOUTS_ELEMENTWISE) want = ~0u;
    for (int k = 0; n_out == 1 && k < LY_KERNEL_MAX_INPUTS; k++)
        if ((want & (1u << k)) && call->in[k] && same_shape(call->in[k], call->out[0]))
            bits |= 1u << k;
    return bits;
}

/* Run `impl` with out[0] over a copy of in[k], in got's out[0]. */
static ly_status run_aliased(const char *slot, const char *impl, const ly_kernel_call *call, int k,
                             output_set *got)
{
    ly_kernel_call c = *call;
    memcpy(got->t[0].data, call->in[k]->data, got->bytes[0]);
    c.in[k] = &got->t[0];
    c.out[0] = &got->t[0];
    return ly_kernel_run_impl(slot, impl, &c);
}

/* How a graph hands an element-wise node blocked maps (graph/plan.c): output
 * and every input of its shape in layout `l`, one-element inputs plain. False
 * when it would not. */
static bool elementwise_plan(const ly_kernel_call *call, int n_out, ly_layout l,
                             ly_kernel_prepare_info *plan)
{
    memset(plan, 0, sizeof *plan);
    const ly_tensor *y = call->out[0];
    if (n_out != 1 || y->ndim != 4 || y->dtype != LY_F32 || !ly_layout_fits(l, y)) return false;
    plan->out_layout[0] = l;
    for (int k = 0; k < LY_KERNEL_MAX_INPUTS; k++) {
        if (!call->in[k]) continue;
        if (same_shape(call->in[k], y))
            plan->in_layout[k] = l;
        else if (ly_tensor_numel(call->in[k]) != 1)
            return false;
    }
    return true;
}

/* Halves every f32 constant input in place (exact); false when there is none. */
static bool rewrite_constants(const ly_kernel_call *call, uint32_t constant)
{
    bool any = false;
    for (int k = 0; k < LY_KERNEL_MAX_INPUTS; k++) {
        const ly_tensor *t = call->in[k];
        if (!(constant & (1u << k)) || !t || t->dtype != LY_F32) continue;
        float *p = t->data;
        for (int64_t i = 0; i < ly_tensor_numel(t); i++)
            p[i] *= 0.5f;
        any = true;
    }
    return any;
}

/* ---- one case ------------------------------------------------------------------------ */

typedef struct case_state {
    check_run *run;
    case_ctx cc;
    ly_kernel_call call;
    uint32_t constant;
    int n_out;
    output_set ref, got;
    snapshot snap;
} case_state;

/* The reference into cs->ref; false (noted on every implementation) when it
 * failed, wrote outside its output or modified an input. */
static bool run_reference(case_state *cs)
{
    check_run *run = cs->run;
    const char *name = cs->cc.c->name;
    for (int i = 0; i < cs->n_out; i++)
        cs->call.out[i] = &cs->ref.t[i];
    outputs_fill(&cs->ref, REFERENCE_CANARY);
    ly_status st = ly_kernel_run_impl(run->def->name, "reference", &cs->call);
    int guard_out = 0;
    int64_t guard = outputs_guard_broken(&cs->ref, &guard_out);
    int modified = snapshot_changed(&cs->snap, &cs->call);
    if (st == LY_OK && guard == INT64_MIN && modified < 0) return true;
    for (int k = 0; k < run->n_impls; k++) {
        ly_check_result *r = &run->impls[k].result;
        if (r->skipped) continue;
        if (st != LY_OK)
            note_error(r, "reference failed on case '%s': %s: %s", name, ly_status_name(st),
                       ly_last_error());
        else if (guard != INT64_MIN)
            note_guard(r, "reference ", guard_out, guard, name, "");
        else
            note_error(r, "reference modified in[%d] on case '%s'", modified, name);
    }
    return false;
}

/* One plain run of `is` into `got` (cs->got when NULL), checked as `how` says;
 * its status. */
static ly_status run_plain(case_state *cs, impl_state *is, int alias, output_set *got,
                           const char *how)
{
    ly_check_result *r = &is->result;
    const char *slot = cs->run->def->name;
    if (!got) got = &cs->got;
    for (int i = 0; i < cs->n_out; i++)
        cs->call.out[i] = &got->t[i];
    outputs_fill(got, IMPL_CANARY);
    ly_status st = alias >= 0 ? run_aliased(slot, is->name, &cs->call, alias, got)
                              : ly_kernel_run_impl(slot, is->name, &cs->call);
    if (is_decline(st)) {
        r->declined++;
        ly_clear_error();
    } else if (st != LY_OK) {
        note_error(r, "failed on case '%s'%s: %s: %s", cs->cc.c->name, how, ly_status_name(st),
                   ly_last_error());
    } else {
        verify_run(r, &cs->cc, &cs->snap, &cs->call, &cs->ref, got, how);
    }
    for (int i = 0; i < cs->n_out; i++) /* `got` may not outlive this run */
        cs->call.out[i] = &cs->got.t[i];
    return st;
}

/* A run of `is` as `plan` lays it out (stateful form, or element-wise on
 * blocked maps); only running out of memory stops the harness. */
static ly_status run_in_layout(case_state *cs, impl_state *is, bool stateful,
                               const ly_kernel_prepare_info *plan, const char *how)
{
    ly_check_result *r = &is->result;
    outputs_fill(&cs->got, IMPL_CANARY);
    ly_status st = run_laid_out(cs->run->def->name, is->impl, stateful, &cs->call, cs->constant,
                                *plan, &cs->got);
    if (st == LY_E_NO_MEMORY) return st;
    if (is_decline(st)) {
        ly_clear_error();
    } else if (st != LY_OK) {
        note_error(r, "failed on case '%s'%s: %s: %s", cs->cc.c->name, how, ly_status_name(st),
                   ly_last_error());
    } else {
        if (stateful) r->prepared++;
        verify_run(r, &cs->cc, &cs->snap, &cs->call, &cs->ref, &cs->got, how);
    }
    return LY_OK;
}

/* Every run of one implementation on the case. */
static ly_status run_impl(case_state *cs, impl_state *is)
{
    check_run *run = cs->run;
    ly_status st = run_plain(cs, is, -1, NULL, "");
    if (st == LY_OK && run->opt->repeat) run_plain(cs, is, -1, NULL, " (second call)");
    for (int k = 1; st == LY_OK && k < 32; k++) {
        if (!(cs->cc.c->out_offsets & (1u << k))) continue;
        ly_tensor shapes[LY_KERNEL_MAX_OUTPUTS];
        for (int i = 0; i < cs->n_out; i++)
            shapes[i] = cs->got.t[i];
        output_set elsewhere;
        if (!outputs_alloc(&elsewhere, shapes, cs->n_out, k)) {
            outputs_free(&elsewhere);
            return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
        }
        char how[48];
        snprintf(how, sizeof how, " (outputs %d elements past 64 bytes)", k);
        run_plain(cs, is, -1, &elsewhere, how);
        outputs_free(&elsewhere);
    }
    if (st == LY_OK) {
        uint32_t over = aliasable(run, &cs->call, cs->n_out);
        for (int k = 0; k < LY_KERNEL_MAX_INPUTS; k++) {
            char how[48];
            snprintf(how, sizeof how, " (out[0] over in[%d])", k);
            if (over & (1u << k)) run_plain(cs, is, k, NULL, how);
        }
    }
    /* A graph hands an element-wise node blocked maps when its implementation
     * offers no layouts of its own. */
    const ly_kernel_stateful *sf = ly_impl_stateful(is->impl);
    if (st == LY_OK && run->def->layouts == LY_LAYOUTS_ELEMENTWISE && !(sf && sf->layouts)) {
        static const ly_layout blocked[2] = {LY_LAYOUT_NCHW8C, LY_LAYOUT_NCHW16C};
        static const char *const hows[2] = {" (element-wise on nChw8c)",
                                            " (element-wise on nChw16c)"};
        for (int b = 0; b < 2; b++) {
            ly_kernel_prepare_info plan;
            if (!elementwise_plan(&cs->call, cs->n_out, blocked[b], &plan)) continue;
            if (run_in_layout(cs, is, false, &plan, hows[b]) == LY_E_NO_MEMORY)
                return LY_E_NO_MEMORY;
        }
    }
    /* The stateful form, with each layout it offers: also where the plain
     * function declined (a state may serve only blocked maps), not where the
     * predicate did. */
    if (!sf || st == LY_E_UNAVAILABLE) return LY_OK;
    ly_kernel_layouts lay = {0};
    if (sf->layouts && sf->layouts(&cs->call, &lay) != LY_OK) memset(&lay, 0, sizeof lay);
    ly_kernel_prepare_info plans[8];
    int n_plans = layout_plans(&lay, &cs->call, cs->constant, plans);
    for (int p = 0; p < n_plans; p++) {
        char how[64];
        layout_text(&plans[p], how, sizeof how);
        if (run_in_layout(cs, is, true, &plans[p], how) == LY_E_NO_MEMORY) return LY_E_NO_MEMORY;
    }
    return LY_OK;
}

/* One case: its outputs are allocated from the contract (a call the contract
 * refuses counts as rejected). Returns a failure only for what stops the
 * harness (no memory). */
static ly_status run_case(check_run *run, const ly_case_set *set, const ly_check_case *c)
{
    case_state cs = {.run = run, .cc = {.op = run->op, .c = c, .set = set}};
    ly_tensor shapes[LY_KERNEL_MAX_OUTPUTS];
    ly_check_case_call(c, &cs.call, &cs.constant);
    cs.call.threads = run->opt->threads;
    if (!cs.call.params) cs.call.params = run->def->defaults;
    ly_status fatal = LY_OK;
    /* The contract's outputs (a call it refuses is nobody's to run). */
    memset(shapes, 0, sizeof shapes);
    if (run->def->contract(&cs.call, shapes, &cs.n_out) != LY_OK) {
        for (int k = 0; k < run->n_impls; k++)
            if (!run->impls[k].result.skipped) run->impls[k].result.rejected++;
        ly_clear_error();
        goto done;
    }
    if (!snapshot_take(&cs.snap, &cs.call) ||
        !outputs_alloc(&cs.ref, shapes, cs.n_out, c->offset) ||
        !outputs_alloc(&cs.got, shapes, cs.n_out, c->offset)) {
        fatal = ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory",
                             run->def->name, c->name);
        goto done;
    }
    if (!run_reference(&cs)) goto done;
    for (int k = 0; k < run->n_impls && fatal == LY_OK; k++)
        if (!run->impls[k].result.skipped) fatal = run_impl(&cs, &run->impls[k]);
    /* The same addresses with other weights: what a cache packed from the
     * first ones must not be served again. */
    if (fatal == LY_OK && run->opt->repeat && rewrite_constants(&cs.call, cs.constant)) {
        snapshot_free(&cs.snap);
        if (!snapshot_take(&cs.snap, &cs.call)) {
            fatal = ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
            goto done;
        }
        if (!run_reference(&cs)) goto done;
        for (int k = 0; k < run->n_impls; k++)
            if (!run->impls[k].result.skipped)
                run_plain(&cs, &run->impls[k], -1, NULL, " (constants rewritten in place)");
    }

done:
    outputs_free(&cs.ref);
    outputs_free(&cs.got);
    snapshot_free(&cs.snap);
    run->done++;
    if (run->opt->progress)
        run->opt->progress(run->def->name, run->done, run->total, run->opt->progress_user);
    return fatal;
}

/* ---- an op's case set ---------------------------------------------------------------- */

/* The name of case `index` (built to learn it where the set cannot say);
 * false past the last. */
static bool case_name(ly_op op, const ly_case_set *set, int64_t index, bool full, char *buf,
                      size_t size)
{
    if (set->name) return set->name(op, index, full, buf, size);
    ly_check_case c;
    ly_check_case_init(&c, index);
    bool found = set->build(op, index, full, &c) == LY_OK;
    if (found) snprintf(buf, size, "%s", c.name);
    ly_check_case_free(&c);
    ly_clear_error();
    return found;
}

static bool wanted(const ly_check_options *opt, ly_op op, const ly_case_set *set, int64_t index,
                   bool full)
{
    char name[sizeof((ly_check_case *)0)->name];
    return !opt->cases ||
           (case_name(op, set, index, full, name, sizeof name) && strstr(name, opt->cases));
}

/* How many cases the set holds (of those the options want). */
static int64_t count_cases(const ly_check_options *opt, ly_op op, const ly_case_set *set, bool full)
{
    int64_t n = 0;
    if (set->count) {
        n = set->count(op, full);
    } else {
        char name[sizeof((ly_check_case *)0)->name];
        while (case_name(op, set, n, full, name, sizeof name))
            n++;
    }
    if (!opt->cases) return n;
    int64_t matched = 0;
    for (int64_t i = 0; i < n; i++)
        matched += wanted(opt, op, set, i, full);
    return matched;
}

ly_status ly_check_op(ly_op op, const ly_check_options *opt, ly_check_adjust_fn adjust,
                      ly_check_report_fn report, void *user, int *n_matched)
{
    const ly_op_def *def = ly_op_def_of(op);
    const ly_case_set *set = def->cases;
    bool full = opt->size == LY_CHECK_FULL;
    check_run *run;
    ly_status st = run_begin(op, opt, 0, &run, n_matched);
    if (st != LY_OK) return st;
    if (run_active(run)) run->total = count_cases(opt, op, set, full);
    for (int64_t i = 0, done = 0; st == LY_OK && run_active(run) && done < run->total; i++) {
        if (!wanted(opt, op, set, i, full)) continue;
        done++;
        ly_check_case c;
        ly_check_case_init(&c, i);
        st = set->build(op, i, full, &c);
        if (st == LY_E_NOT_FOUND) {
            ly_check_case_free(&c);
            ly_clear_error();
            st = LY_OK;
            break;
        }
        if (st == LY_OK) {
            if (adjust) adjust(&c);
            st = run_case(run, set, &c);
        }
        ly_check_case_free(&c);
    }
    run_end(run, st == LY_OK ? report : NULL, user);
    return st;
}

/* ---- the driver ---------------------------------------------------------------------- */

/* A slot only a plugin knows: no contract, no cases. */
typedef struct uncovered {
    const ly_check_options *opt;
    ly_check_report_fn report;
    void *user;
    int *n_matched;
} uncovered;

static void report_uncovered(const char *slot, const char *impl, bool eligible, const char *why_not,
                             void *user)
{
    (void)eligible;
    (void)why_not;
    uncovered *u = user;
    if (!impl_selected(u->opt, impl)) return;
    ly_check_result r;
    memset(&r, 0, sizeof r);
    r.slot = slot;
    r.impl = impl;
    r.skipped = true;
    snprintf(r.why_skipped, sizeof r.why_skipped, "the harness has no cases for this slot");
    if (u->report) u->report(&r, u->user);
    ++*u->n_matched;
}

static ly_status check_slot(const char *slot, const ly_check_options *opt,
                            ly_check_report_fn report, void *user, int *n_matched)
{
    ly_op op;
    if (ly_op_lookup(slot, &op)) return ly_check_op(op, opt, NULL, report, user, n_matched);
    uncovered u = {opt, report, user, n_matched};
    return ly_kernel_list(slot, report_uncovered, &u);
}

ly_status ly_check_parity_ex(const ly_check_options *options, ly_check_report_fn report, void *user)
{
    if (!options) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_check_parity: options is NULL");
    ly_status st = LY_OK;
    int matched = 0;
    if (options->slot) {
        st = check_slot(options->slot, options, report, user, &matched);
    } else {
        size_t count = 0;
        st = ly_kernel_slot_count(&count);
        for (size_t i = 0; st == LY_OK && i < count; i++) {
            const char *slot = NULL;
            st = ly_kernel_slot_name(i, &slot);
            if (st == LY_OK) st = check_slot(slot, options, report, user, &matched);
        }
    }
    if (st == LY_OK && options->impl && matched == 0)
        st = ly_set_error(LY_E_NOT_FOUND, "ly_check_parity: no implementation named '%s'%s%s",
                          options->impl, options->slot ? " in slot " : "",
                          options->slot ? options->slot : "");
    return st;
}

ly_status ly_check_parity(const char *slot_or_null, const char *impl_or_null, int threads,
                          ly_check_report_fn report, void *user)
{
    ly_check_options options = {
        .slot = slot_or_null, .impl = impl_or_null, .threads = threads, .size = LY_CHECK_QUICK};
    return ly_check_parity_ex(&options, report, user);
}

ly_status ly_check_verdict(const ly_check_result *r, char *buf, size_t size)
{
    if (!buf || size == 0 || !r)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_check_verdict: NULL or empty argument");
    buf[0] = '\0';
    size_t len = 0;
    if (r->skipped)
        len = (size_t)snprintf(buf, size, "skipped: %s", r->why_skipped);
    else if (r->mismatches > 0)
        len = (size_t)snprintf(buf, size, "MISMATCH");
    else if (r->errors > 0)
        len = (size_t)snprintf(buf, size, "ERROR");
    else if (r->cases == 0)
        len = (size_t)snprintf(buf, size, "no cases run");
    else if (r->exact || r->bit_differences == 0)
        len = (size_t)snprintf(buf, size, "bit-identical");
    else
        len = (size_t)snprintf(buf, size, "within %g%s", r->tolerance,
                               r->relative ? " of max(1, max|ref|)" : "");
    if (r->declined > 0 && len < size)
        snprintf(buf + len, size - len, " (%" PRId64 " declined)", r->declined);
    return LY_OK;
}
