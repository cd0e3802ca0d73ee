/* SPDX-License-Identifier: MIT */
/* The portable operators' schemas (src/pte/op_schema.h): every row encoded,
 * written, decoded and type-checked, and a value of another kind refused by
 * the encoder and by the check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "pte/op_schema.h"
#include "pte/pte.h"

#include <stdlib.h>
#include <string.h>

static int32_t one_dim[1] = {1};
static uint8_t one_order[1] = {0};

static int add_tensor(ly_pte_values *v)
{
    ly_pte_evalue e = {.type = LY_PTE_EVALUE_TENSOR};
    e.u.tensor = (ly_pte_tensor){.scalar_type = LY_PTE_FLOAT,
                                 .sizes = one_dim,
                                 .n_sizes = 1,
                                 .dim_order = one_order,
                                 .n_dim_order = 1,
                                 .allocation_info = {.present = true, .memory_id = 1}};
    return ly_pte_values_add(v, e);
}

/* Call `s` through the encoder, optional arguments given (or None); one
 * argument (`wrong`, -1: none) gets value `bad` instead. */
static ly_status encode_call(const ly_pte_op_schema *s, ly_pte_portable_op op, ly_pte_values *v,
                             bool optionals, int wrong, int32_t bad, ly_pte_call *k, size_t *n)
{
    static const int64_t ints[2] = {1, 2};
    static const double doubles[2] = {2.0, 2.0};
    ly_pte_call_begin(k, op, v);
    for (int i = 0; i < s->n_args; i++) {
        if (i == wrong) {
            ly_pte_call_value(k, bad);
            continue;
        }
        switch (s->args[i].kind) {
        case LY_PTE_ARG_TENSOR:
            ly_pte_call_value(k, add_tensor(v));
            break;
        case LY_PTE_ARG_OPT_TENSOR:
            if (optionals)
                ly_pte_call_value(k, add_tensor(v));
            else
                ly_pte_call_none(k);
            break;
        case LY_PTE_ARG_TENSOR_LIST: {
            int32_t *items = malloc(2 * sizeof *items); /* freed with the values */
            items[0] = items[1] = add_tensor(v);
            ly_pte_evalue e = {.type = LY_PTE_EVALUE_TENSOR_LIST};
            e.u.tensor_list.items = items;
            e.u.tensor_list.n_items = 2;
            ly_pte_call_value(k, ly_pte_values_add(v, e));
            v->blocks = realloc(v->blocks, (v->n_blocks + 1) * sizeof *v->blocks);
            v->blocks[v->n_blocks++] = items;
            v->cap_blocks = v->n_blocks;
            break;
        }
        case LY_PTE_ARG_INT:
        case LY_PTE_ARG_SCALAR:
            ly_pte_call_int(k, 2);
            break;
        case LY_PTE_ARG_OPT_INT:
            if (optionals)
                ly_pte_call_int(k, 0);
            else
                ly_pte_call_none(k);
            break;
        case LY_PTE_ARG_INT_LIST:
            ly_pte_call_int_list(k, 2, ints);
            break;
        case LY_PTE_ARG_OPT_INT_LIST:
            if (optionals)
                ly_pte_call_int_list(k, 2, ints);
            else
                ly_pte_call_none(k);
            break;
        case LY_PTE_ARG_BOOL:
            ly_pte_call_bool(k, true);
            break;
        case LY_PTE_ARG_FLOAT:
            ly_pte_call_double(k, 1e-5);
            break;
        case LY_PTE_ARG_OPT_FLOAT_LIST:
            if (optionals)
                ly_pte_call_double_list(k, 2, doubles);
            else
                ly_pte_call_none(k);
            break;
        case LY_PTE_ARG_KIND_COUNT:
            fail();
        }
    }
    for (int i = 0; i < s->n_outs; i++)
        ly_pte_call_out(k, add_tensor(v));
    return ly_pte_call_finish(k, n);
}

/* Every row: a call written through the encoder is a program that decodes,
 * and its decoded arguments pass the same row's check, with or without the
 * return values and with its optional arguments given or None. A value of
 * another kind in any argument is refused by the encoder and by the check. */
static void test_operator_schemas(void **state)
{
    (void)state;
    for (int op = 0; op < LY_PTE_PORTABLE_COUNT; op++) {
        const ly_pte_op_schema *s = &ly_pte_op_schemas[op];
        assert_non_null(s->name);
        ly_pte_portable_op found;
        assert_true(ly_pte_op_find(s->name, s->overload, &found));
        assert_int_equal(found, op);
        for (int optionals = 0; optionals < 2; optionals++) {
            ly_pte_values v = {0};
            ly_pte_call k;
            size_t n = 0;
            /* values of other kinds for the refusals below */
            assert_int_equal(ly_pte_values_bool(&v, false), 0);
            assert_int_equal(ly_pte_values_int(&v, 0), 1);
            ly_status st = encode_call(s, (ly_pte_portable_op)op, &v, optionals, -1, 0, &k, &n);
            if (st != LY_OK) fail_msg("%s.%s: %s", s->name, s->overload, ly_last_error());
            assert_int_equal(n, (size_t)(s->n_args + 2 * s->n_outs));
            /* one KernelCall, its outs the program's outputs */
            ly_pte_operator oper = {s->name, s->overload};
            ly_pte_instruction ins = {.type = LY_PTE_KERNEL_CALL};
            ins.u.kernel_call.args = k.args;
            ins.u.kernel_call.n_args = n;
            ly_pte_chain chain = {.instructions = &ins, .n_instructions = 1};
            static const int64_t buffers[2] = {0, 16};
            static const uint64_t offsets[1] = {0};
            ly_pte_plan plan = {.name = LY_PTE_FORWARD,
                                .values = v.items,
                                .n_values = v.n,
                                .outputs = &k.args[s->n_args],
                                .n_outputs = (size_t)s->n_outs,
                                .chains = &chain,
                                .n_chains = 1,
                                .operators = &oper,
                                .n_operators = 1,
                                .non_const_buffer_sizes = buffers,
                                .n_non_const_buffer_sizes = 2};
            ly_pte_program prog = {
                .execution_plan = &plan,
                .n_execution_plan = 1,
                .constant_segment = {.present = true, .offsets = offsets, .n_offsets = 1}};
            ly_pte_segment_in seg0 = {0};
            uint8_t *bytes = NULL;
            size_t size = 0;
            st = ly_pte_encode(&prog, &seg0, 1, &bytes, &size);
            if (st != LY_OK) fail_msg("%s.%s: %s", s->name, s->overload, ly_last_error());
            ly_pte_program *p = NULL;
            assert_int_equal(ly_pte_decode(bytes, size, "schemas", &p), LY_OK);
            const ly_pte_plan *dp = ly_pte_find_plan(p, LY_PTE_FORWARD);
            const ly_pte_instruction *di = &dp->chains[0].instructions[0];
            assert_true(ly_pte_op_find(dp->operators[0].name, dp->operators[0].overload, &found));
            assert_int_equal(found, op);
            const int32_t *args = di->u.kernel_call.args;
            for (size_t m = n - (size_t)s->n_outs; m <= n; m += (size_t)s->n_outs) {
                st = ly_pte_call_check(s, args, m, ly_pte_evalue_type_of, dp->values, "row");
                if (st != LY_OK) fail_msg("%s.%s: %s", s->name, s->overload, ly_last_error());
            }
            /* an IntList's items are Int values */
            for (int i = 0; i < s->n_args; i++) {
                const ly_pte_evalue *e = &dp->values[args[i]];
                for (size_t j = 0; e->type == LY_PTE_EVALUE_INT_LIST && j < e->u.int_list.n_items;
                     j++)
                    assert_int_equal(dp->values[e->u.int_list.items[j]].type, LY_PTE_EVALUE_INT);
            }
            /* one argument short, or the return values not the outs */
            assert_int_equal(ly_pte_call_check(s, args, n - (size_t)s->n_outs - 1,
                                               ly_pte_evalue_type_of, dp->values, "row"),
                             LY_E_UNSUPPORTED);
            assert_non_null(strstr(ly_last_error(), "arguments, expected"));
            /* a value of another kind in each argument and each out */
            for (int i = 0; i < s->n_args + s->n_outs; i++) {
                ly_pte_arg_kind kind = i < s->n_args ? s->args[i].kind : LY_PTE_ARG_TENSOR;
                int32_t bad = -1;
                for (int32_t j = 0; j < (int32_t)dp->n_values && bad < 0; j++)
                    if (!ly_pte_arg_kind_accepts(kind, (int)dp->values[j].type)) bad = j;
                assert_true(bad >= 0);
                int32_t changed[LY_PTE_SCHEMA_MAX_ARGS + 2 * LY_PTE_SCHEMA_MAX_OUTS];
                memcpy(changed, args, n * sizeof *args);
                changed[i] = bad;
                assert_int_equal(ly_pte_call_check(s, changed, n - (size_t)s->n_outs,
                                                   ly_pte_evalue_type_of, dp->values, "row"),
                                 LY_E_UNSUPPORTED);
                const char *name = i < s->n_args ? s->args[i].name : s->outs[i - s->n_args];
                if (!strstr(ly_last_error(), name))
                    fail_msg("%s.%s: %s does not name %s", s->name, s->overload, ly_last_error(),
                             name);
                if (i < s->n_args) {
                    ly_pte_values w = {0};
                    ly_pte_call bad_call;
                    size_t unused;
                    int32_t wrong = ly_pte_values_bool(&w, false);
                    if (kind == LY_PTE_ARG_BOOL) wrong = ly_pte_values_int(&w, 0);
                    assert_int_equal(encode_call(s, (ly_pte_portable_op)op, &w, optionals, i, wrong,
                                                 &bad_call, &unused),
                                     LY_E_INTERNAL);
                    assert_non_null(strstr(ly_last_error(), s->name));
                    ly_pte_values_free(&w);
                }
            }
            ly_pte_program_free(p);
            free(bytes);
            ly_pte_values_free(&v);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_operator_schemas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
