/* SPDX-License-Identifier: MIT */
/* The recipe table is the one list of families: the export support matrix
 * (families, their tasks, their rows) is computed from it, and every recipe's
 * facts hold together. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "libreyolo/export.h"
#include "models/recipe.h"

#include <string.h>

/* ly_export_families lists every recipe once, in name order. */
static void test_families_are_the_recipes(void **state)
{
    (void)state;
    const char *const *families;
    size_t n;
    assert_int_equal(ly_export_families(&families, &n), LY_OK);
    assert_int_equal(n, (size_t)ly_recipe_count);
    for (size_t i = 0; i < n; i++) {
        if (i) assert_true(strcmp(families[i - 1], families[i]) < 0);
        assert_non_null(ly_recipe_find(families[i]));
    }
    for (int i = 0; i < ly_recipe_count; i++) {
        bool listed = false;
        for (size_t k = 0; k < n; k++)
            listed |= strcmp(families[k], ly_recipes[i]->family) == 0;
        assert_true(listed);
    }
}

/* A recipe's tasks start with the one it runs; every row is for a canonical
 * task of the family and a registered format (or all of them), with a reason. */
static void test_recipe_facts_hold(void **state)
{
    (void)state;
    for (int i = 0; i < ly_recipe_count; i++) {
        const ly_recipe *r = ly_recipes[i];
        const char *const *tasks;
        size_t n;
        assert_int_equal(ly_export_family_tasks(r->family, &tasks, &n), LY_OK);
        assert_true(n >= 1);
        assert_string_equal(tasks[0], r->task);
        for (size_t k = 0; k < n; k++) {
            const char *canonical = ly_export_canonical_task(tasks[k]);
            assert_non_null(canonical);
            assert_string_equal(canonical, tasks[k]);
        }
        assert_true(r->default_conf >= 0.f && r->default_conf <= 1.f);
        assert_true(r->default_iou >= 0.f && r->default_iou <= 1.f);
        assert_true(r->default_max_det >= 1);
        for (const ly_export_rule *row = r->export_rules; row && row->task; row++) {
            bool listed = false;
            for (size_t k = 0; k < n; k++)
                listed |= strcmp(tasks[k], row->task) == 0;
            if (!listed)
                fail_msg("%s: a row for task %s, not one of its tasks", r->family, row->task);
            assert_true(!row->format || ly_export_find_format(row->format) != NULL);
            assert_non_null(row->reason);
            ly_export_tier tier;
            const char *reason, *constraint;
            const char *format = row->format ? row->format : "executorch";
            assert_int_equal(
                ly_export_support(r->family, row->task, format, &tier, &reason, &constraint),
                LY_OK);
            assert_int_equal(tier, row->tier);
            assert_ptr_equal(reason, row->reason);
            assert_ptr_equal(constraint, row->constraint);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families_are_the_recipes),
        cmocka_unit_test(test_recipe_facts_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
