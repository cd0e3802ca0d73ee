/* SPDX-License-Identifier: MIT */
/* `libreyolo kernels`: which implementation serves each slot here, and why. */
#include "libreyolo/kernels.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "libreyolo/hub.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ly_cli_usage_kernels(FILE *to)
{
    fputs("usage: libreyolo kernels [--all] [--json]\n"
          "       libreyolo kernels check [--help] ...\n"
          "       libreyolo kernels run [--help] SLOT ...\n"
          "\n"
          "Without options: the implementation each slot resolves to on this machine.\n"
          "  --all   every implementation of every slot, newest first, with why each is or is\n"
          "          not eligible here, the selection in force (LIBREYOLO_KERNELS), and the\n"
          "          pinned hub providers: pinned, cached, loaded or disabled, and why\n"
          "  --json  the same as one JSON object\n",
          to);
}

/* ---- What the registry reports, copied (its strings may not outlive the call) */

typedef struct impl_row {
    char *name;
    bool eligible;
    char *why_not;
} impl_row;

typedef struct slot_row {
    char *slot;
    char *active;
    impl_row *impls;
    size_t n_impls;
} slot_row;

typedef struct report {
    slot_row *slots;
    size_t n_slots;
    bool out_of_memory;
} report;

static char *copy_string(report *r, const char *s)
{
    char *c = strdup(s ? s : "");
    if (!c) r->out_of_memory = true;
    return c;
}

static void on_active(const char *slot, const char *impl, void *user)
{
    report *r = user;
    slot_row *grown = realloc(r->slots, (r->n_slots + 1) * sizeof *grown);
    if (!grown) {
        r->out_of_memory = true;
        return;
    }
    r->slots = grown;
    r->slots[r->n_slots++] = (slot_row){copy_string(r, slot), copy_string(r, impl), NULL, 0};
}

typedef struct list_ctx {
    report *r;
    slot_row *row;
} list_ctx;

static void on_impl(const char *slot, const char *impl, bool eligible, const char *why_not,
                    void *user)
{
    (void)slot;
    list_ctx *ctx = user;
    slot_row *row = ctx->row;
    impl_row *grown = realloc(row->impls, (row->n_impls + 1) * sizeof *grown);
    if (!grown) {
        ctx->r->out_of_memory = true;
        return;
    }
    row->impls = grown;
    row->impls[row->n_impls++] = (impl_row){copy_string(ctx->r, impl), eligible,
                                            why_not ? copy_string(ctx->r, why_not) : NULL};
}

static void report_free(report *r)
{
    for (size_t i = 0; i < r->n_slots; i++) {
        for (size_t j = 0; j < r->slots[i].n_impls; j++) {
            free(r->slots[i].impls[j].name);
            free(r->slots[i].impls[j].why_not);
        }
        free(r->slots[i].impls);
        free(r->slots[i].slot);
        free(r->slots[i].active);
    }
    free(r->slots);
}

/* ---- Selection, parsed as the registry does (strip, lower-case) ------------ */

typedef struct selection {
    const char *variable; /* NULL: nothing forced */
    char value[128];
} selection;

static bool read_selection_variable(const char *variable, selection *sel)
{
    const char *raw = getenv(variable);
    if (!raw) return false;
    while (*raw && isspace((unsigned char)*raw))
        raw++;
    size_t n = strlen(raw);
    while (n > 0 && isspace((unsigned char)raw[n - 1]))
        n--;
    if (n == 0) return false;
    if (n >= sizeof sel->value) n = sizeof sel->value - 1;
    for (size_t i = 0; i < n; i++)
        sel->value[i] = (char)tolower((unsigned char)raw[i]);
    sel->value[n] = '\0';
    sel->variable = variable;
    return true;
}

static selection selection_in_force(void)
{
    selection sel = {0};
    if (!read_selection_variable("LIBREYOLO_KERNELS", &sel))
        read_selection_variable("LIBREYOLO_QUANT_KERNELS", &sel);
    return sel;
}

static bool selection_is_reference_only(const selection *sel)
{
    return sel->variable &&
           (strcmp(sel->value, "off") == 0 || strcmp(sel->value, "reference") == 0);
}

/* ---- Hub providers (src/kernels/hub) ------------------------------------------ */

static void json_string_or_null(const char *s)
{
    ly_json_string(stdout, s && *s ? s : NULL);
}

static void print_hub_json(const ly_hub_status *hub)
{
    fprintf(stdout, ", \"hub\": {\"built\": %s, \"consulted\": %s, \"why_off\": ",
            hub->built ? "true" : "false", hub->consulted ? "true" : "false");
    json_string_or_null(hub->why_off);
    fputs(", \"url\": ", stdout);
    json_string_or_null(hub->url);
    fputs(", \"lock\": ", stdout);
    json_string_or_null(hub->lock);
    fputs(", \"lock_error\": ", stdout);
    json_string_or_null(hub->lock_error);
    fputs(", \"providers\": [", stdout);
    for (size_t i = 0; i < hub->count; i++) {
        const ly_hub_entry *e = &hub->entries[i];
        fputs(i ? ", {\"name\": " : "{\"name\": ", stdout);
        ly_json_string(stdout, e->name);
        fputs(", \"slots\": [", stdout);
        char slots[sizeof e->slots];
        snprintf(slots, sizeof slots, "%s", e->slots);
        char *save = NULL;
        int k = 0;
        for (char *t = strtok_r(slots, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            fputs(k++ ? ", " : "", stdout);
            ly_json_string(stdout, t);
        }
        fputs("], \"revision\": ", stdout);
        ly_json_string(stdout, e->revision);
        fputs(", \"variant\": ", stdout);
        json_string_or_null(e->variant);
        fputs(", \"file\": ", stdout);
        json_string_or_null(e->file);
        fputs(", \"sha256\": ", stdout);
        json_string_or_null(e->sha256);
        fputs(", \"state\": ", stdout);
        ly_json_string(stdout, e->state);
        fputs(", \"why\": ", stdout);
        json_string_or_null(e->why);
        fputs(", \"path\": ", stdout);
        json_string_or_null(e->path);
        fputs("}", stdout);
    }
    fputs("]}", stdout);
}

static void print_hub(const ly_hub_status *hub)
{
    if (hub->consulted)
        printf("\nhub: consulted, LIBREYOLO_HUB_URL=%s\n", hub->url);
    else
        printf("\nhub: not consulted in this process: %s\n", hub->why_off);
    printf("  lock: %s\n", hub->lock);
    if (hub->lock_error[0])
        printf("  lock error: %s\n", hub->lock_error);
    else if (hub->count == 0)
        puts("  (no provider pinned)");
    int name_width = 0, slot_width = 0;
    for (size_t i = 0; i < hub->count; i++) {
        int n = (int)strlen(hub->entries[i].name);
        if (n > name_width) name_width = n;
        n = (int)strlen(hub->entries[i].slots);
        if (n > slot_width) slot_width = n;
    }
    for (size_t i = 0; i < hub->count; i++) {
        const ly_hub_entry *e = &hub->entries[i];
        printf("  %-*s  %-*s  revision %s  %s  %s", name_width, e->name, slot_width, e->slots,
               e->revision, e->variant[0] ? e->variant : "(no variant)", e->state);
        if (e->why[0]) printf(": %s", e->why);
        putchar('\n');
    }
}

/* ---- Output ------------------------------------------------------------------ */

static void print_json(const report *r, const selection *sel, bool all, const ly_hub_status *hub)
{
    fputs("{\"version\": ", stdout);
    ly_json_string(stdout, ly_version());
    fputs(", \"selection\": ", stdout);
    if (sel->variable) {
        fputs("{\"variable\": ", stdout);
        ly_json_string(stdout, sel->variable);
        fputs(", \"value\": ", stdout);
        ly_json_string(stdout, sel->value);
        fputs("}", stdout);
    } else {
        fputs("null", stdout);
    }
    fputs(", \"active\": {", stdout);
    for (size_t i = 0; i < r->n_slots; i++) {
        fputs(i ? ", " : "", stdout);
        ly_json_string(stdout, r->slots[i].slot);
        fputs(": ", stdout);
        ly_json_string(stdout, r->slots[i].active);
    }
    fputs("}", stdout);
    if (all) {
        fputs(", \"slots\": [", stdout);
        for (size_t i = 0; i < r->n_slots; i++) {
            const slot_row *row = &r->slots[i];
            fputs(i ? ", {\"slot\": " : "{\"slot\": ", stdout);
            ly_json_string(stdout, row->slot);
            fputs(", \"active\": ", stdout);
            ly_json_string(stdout, row->active);
            fputs(", \"implementations\": [", stdout);
            for (size_t j = 0; j < row->n_impls; j++) {
                fputs(j ? ", {\"name\": " : "{\"name\": ", stdout);
                ly_json_string(stdout, row->impls[j].name);
                fprintf(stdout, ", \"eligible\": %s, \"why_not\": ",
                        row->impls[j].eligible ? "true" : "false");
                ly_json_string(stdout, row->impls[j].eligible ? NULL : row->impls[j].why_not);
                fputs("}", stdout);
            }
            fputs("]}", stdout);
        }
        fputs("]", stdout);
        if (hub) print_hub_json(hub);
    }
    fputs("}\n", stdout);
}

static void print_active(const report *r)
{
    int width = 0;
    for (size_t i = 0; i < r->n_slots; i++) {
        int n = (int)strlen(r->slots[i].slot);
        if (n > width) width = n;
    }
    for (size_t i = 0; i < r->n_slots; i++)
        printf("%-*s  %s\n", width, r->slots[i].slot, r->slots[i].active);
}

static void print_all(const report *r, const selection *sel, const ly_hub_status *hub)
{
    if (!sel->variable)
        puts("selection: default, the newest eligible implementation "
             "(LIBREYOLO_KERNELS is unset)");
    else if (selection_is_reference_only(sel))
        printf("selection: %s=%s: reference only, accelerated providers not loaded\n",
               sel->variable, sel->value);
    else
        printf("selection: %s=%s: only implementations named \"%s\", then \"reference\"\n",
               sel->variable, sel->value, sel->value);
    puts("(* marks the implementation a call gets)\n");
    int slot_width = 0, impl_width = 0;
    for (size_t i = 0; i < r->n_slots; i++) {
        int n = (int)strlen(r->slots[i].slot);
        if (n > slot_width) slot_width = n;
        for (size_t j = 0; j < r->slots[i].n_impls; j++) {
            n = (int)strlen(r->slots[i].impls[j].name);
            if (n > impl_width) impl_width = n;
        }
    }
    for (size_t i = 0; i < r->n_slots; i++) {
        const slot_row *row = &r->slots[i];
        if (row->n_impls == 0)
            printf("%-*s    (no implementation registered: %s)\n", slot_width, row->slot,
                   row->active);
        for (size_t j = 0; j < row->n_impls; j++) {
            const impl_row *impl = &row->impls[j];
            bool active = strcmp(impl->name, row->active) == 0;
            printf("%-*s  %s %-*s  ", slot_width, j == 0 ? row->slot : "", active ? "*" : " ",
                   impl_width, impl->name);
            if (impl->eligible)
                puts("eligible");
            else
                printf("not eligible: %s\n",
                       impl->why_not && *impl->why_not ? impl->why_not : "(no reason given)");
        }
    }
    if (hub) print_hub(hub);
}

int ly_cli_kernels(int argc, char **argv)
{
    if (argc > 0 && strcmp(argv[0], "check") == 0) return ly_cli_kernels_check(argc - 1, argv + 1);
    if (argc > 0 && strcmp(argv[0], "run") == 0) return ly_cli_kernels_run(argc - 1, argv + 1);
    bool all = false, json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--all") == 0) {
            all = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            ly_cli_usage_kernels(stdout);
            return 0;
        } else {
            fprintf(stderr, "libreyolo kernels: unknown argument '%s'\n", argv[i]);
            ly_cli_usage_kernels(stderr);
            return 2;
        }
    }

    selection sel = selection_in_force();
    report r = {0};
    ly_status st = ly_kernel_active(on_active, &r);
    for (size_t i = 0; st == LY_OK && all && i < r.n_slots && !r.out_of_memory; i++) {
        list_ctx ctx = {&r, &r.slots[i]};
        st = ly_kernel_list(r.slots[i].slot, on_impl, &ctx);
    }
    /* After the registry initialised: that is when the hub is consulted. */
    ly_hub_status hub = {0};
    bool have_hub = false;
    if (st == LY_OK && all) {
        st = ly_hub_status_get(&hub);
        have_hub = st == LY_OK;
    }
    int code = 0;
    if (st != LY_OK) {
        fprintf(stderr, "libreyolo: %s\n", ly_last_error());
        code = 1;
    } else if (r.out_of_memory) {
        fputs("libreyolo: out of memory\n", stderr);
        code = 1;
    } else if (json) {
        print_json(&r, &sel, all, have_hub ? &hub : NULL);
    } else if (all) {
        print_all(&r, &sel, have_hub ? &hub : NULL);
    } else {
        print_active(&r);
    }
    report_free(&r);
    ly_hub_status_free(&hub);
    if (code == 0 && fflush(stdout) != 0) {
        perror("libreyolo: stdout");
        code = 1;
    }
    return code;
}
