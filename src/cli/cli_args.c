/* SPDX-License-Identifier: MIT */
#include "cli/cli_args.h"

#include "cli/cli_util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- Options from the help text ------------------------------------------ */

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static void add_flag(ly_cli_flags *f, const char *name, size_t len, ly_cli_flag_kind kind)
{
    if (len == 0 || len >= sizeof f->items[0].name) return;
    for (size_t i = 0; i < f->n; i++)
        if (strlen(f->items[i].name) == len && strncmp(f->items[i].name, name, len) == 0) {
            /* "[--save DIR | --no-save]" and "--save [DIR]": the most permissive wins */
            if (kind == LY_CLI_FLAG_OPTIONAL || f->items[i].kind == LY_CLI_FLAG_BOOL)
                f->items[i].kind = kind;
            return;
        }
    if (f->n == LY_CLI_MAX_FLAGS) return;
    memcpy(f->items[f->n].name, name, len);
    f->items[f->n].name[len] = '\0';
    f->items[f->n].kind = kind;
    f->n++;
}

void ly_cli_flags_from_usage(void (*usage)(FILE *to), ly_cli_flags *out)
{
    out->n = 0;
    char *text = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&text, &size);
    if (!mem) return;
    usage(mem);
    fclose(mem);
    for (const char *p = text; p && *p; p++) {
        if (p[0] != '-' || p[1] != '-' || !name_char(p[2]) || p[2] == '-') continue;
        if (p > text && !strchr(" [|(\n", p[-1])) continue;
        const char *name = p + 2, *end = name;
        while (name_char(*end))
            end++;
        ly_cli_flag_kind kind = LY_CLI_FLAG_BOOL;
        if (end[0] == '=' || (end[0] == ' ' && isupper((unsigned char)end[1])))
            kind = LY_CLI_FLAG_VALUE;
        else if (end[0] == ' ' && end[1] == '[' && isupper((unsigned char)end[2]))
            kind = LY_CLI_FLAG_OPTIONAL;
        add_flag(out, name, (size_t)(end - name), kind);
        p = end - 1;
    }
    free(text);
}

const ly_cli_flag *ly_cli_flag_find(const ly_cli_flags *flags, const char *name)
{
    for (size_t i = 0; flags && i < flags->n; i++)
        if (strcmp(flags->items[i].name, name) == 0) return &flags->items[i];
    return NULL;
}

/* ---- Normalisation --------------------------------------------------------- */

static char *format(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* `key` with underscores as hyphens, into buf. */
static const char *hyphens(const char *key, size_t len, char *buf, size_t size)
{
    size_t n = len < size - 1 ? len : size - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = key[i] == '_' ? '-' : key[i];
    buf[n] = '\0';
    return buf;
}

/* LibreYOLO's key=value token: ^[A-Za-z_][A-Za-z0-9_-]*=. */
static size_t key_length(const char *t)
{
    if (!(isalpha((unsigned char)t[0]) || t[0] == '_')) return 0;
    size_t i = 1;
    while (isalnum((unsigned char)t[i]) || t[i] == '_' || t[i] == '-')
        i++;
    return t[i] == '=' ? i : 0;
}

/* LibreYOLO's true/false/1/0, and yes/no/on/off besides. */
static int truth(const char *v)
{
    static const char *const yes[] = {"true", "1", "yes", "on"}, *const no[] = {"false", "0", "no",
                                                                                "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) return 1;
        if (strcasecmp(v, no[i]) == 0) return 0;
    }
    return -1;
}

char **ly_cli_normalize_args(const char *command, int argc, char **argv, const ly_cli_flags *flags,
                             int *out_argc, int *code)
{
    *code = 0;
    *out_argc = 0;
    char **out = calloc((size_t)argc + 1, sizeof *out);
    if (!out) {
        fputs("libreyolo: out of memory\n", stderr);
        *code = 1;
        return NULL;
    }
    int n = 0;
    bool raw = false; /* after "--" or when the previous option takes this as its value */
    for (int i = 0; i < argc; i++) {
        const char *t = argv[i];
        char name[64];
        if (raw || strcmp(t, "--") == 0) {
            out[n++] = argv[i];
            if (strcmp(t, "--") == 0) raw = true;
            continue;
        }
        if (t[0] == '-' && t[1] == '-' && t[2]) {
            const char *eq = strchr(t, '=');
            size_t len = eq ? (size_t)(eq - t - 2) : strlen(t + 2);
            hyphens(t + 2, len, name, sizeof name);
            const ly_cli_flag *f = ly_cli_flag_find(flags, name);
            /* --save=false, --save false: a truth word after a flag is its value, not
             * a folder named "false" (--save ./false names that one). */
            const char *word = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
            int yes = f && f->kind != LY_CLI_FLAG_VALUE && word ? truth(word) : -1;
            if (yes >= 0) {
                if (!eq) i++;
                char no[80];
                snprintf(no, sizeof no, "no-%s", name);
                if (yes == 1)
                    out[n++] = format("--", name, "");
                else if (ly_cli_flag_find(flags, no))
                    out[n++] = format("--", no, "");
                else
                    continue; /* off is the default of a flag without a --no- form */
                if (!out[n - 1]) goto no_memory;
                continue;
            }
            if (strchr(t, '_') && (!eq || strchr(t, '_') < eq)) {
                out[n++] = format("--", name, eq ? eq : "");
                if (!out[n - 1]) goto no_memory;
            } else {
                out[n++] = argv[i];
            }
            /* Its value follows as the next word, whatever that word looks like. */
            if (!eq && f && f->kind == LY_CLI_FLAG_VALUE && i + 1 < argc) out[n++] = argv[++i];
            continue;
        }
        size_t klen = key_length(t);
        if (klen) {
            hyphens(t, klen, name, sizeof name);
            const char *value = t + klen + 1;
            const ly_cli_flag *f = ly_cli_flag_find(flags, name);
            if (f && f->kind != LY_CLI_FLAG_VALUE) {
                int yes = truth(value);
                char no[80];
                snprintf(no, sizeof no, "no-%s", name);
                if (yes == 1) {
                    out[n++] = format("--", name, "");
                } else if (yes == 0) {
                    /* Off is the default of a flag without a --no- form. */
                    if (!ly_cli_flag_find(flags, no)) continue;
                    out[n++] = format("--", no, "");
                } else if (f->kind == LY_CLI_FLAG_OPTIONAL) {
                    out[n++] = format("--", name, value - 1);
                } else {
                    ly_cli_args_free(out, n, argv);
                    *code = ly_cli_usage_error(command, "%s: expected %s=true or %s=false", t, name,
                                               name);
                    return NULL;
                }
            } else {
                out[n++] = format("--", name, value - 1);
            }
            if (!out[n - 1]) goto no_memory;
            continue;
        }
        /* A bare word naming a boolean option ("save", "exist_ok") is that option. */
        const ly_cli_flag *f = ly_cli_flag_find(flags, hyphens(t, strlen(t), name, sizeof name));
        if (f && f->kind != LY_CLI_FLAG_VALUE && t[0] != '-') {
            out[n++] = format("--", name, "");
            if (!out[n - 1]) goto no_memory;
            continue;
        }
        out[n++] = argv[i];
    }
    *out_argc = n;
    return out;
no_memory:
    ly_cli_args_free(out, n, argv);
    fputs("libreyolo: out of memory\n", stderr);
    *code = 1;
    return NULL;
}

void ly_cli_args_free(char **args, int argc, char **original)
{
    if (!args) return;
    /* Ours are the strings that are not argv's own. */
    for (int i = 0; i < argc; i++) {
        bool borrowed = false;
        for (int k = 0; original && original[k] && !borrowed; k++)
            borrowed = args[i] == original[k];
        if (!borrowed) free(args[i]);
    }
    free(args);
}

/* ---- "Did you mean" ------------------------------------------------------- */

static const ly_cli_flags *current_flags;

void ly_cli_set_current_flags(const ly_cli_flags *flags)
{
    current_flags = flags;
}

int ly_cli_unknown_argument(const char *command, const char *arg)
{
    const char *names[LY_CLI_MAX_FLAGS];
    size_t n = 0;
    for (size_t i = 0; current_flags && i < current_flags->n; i++)
        names[n++] = current_flags->items[i].name;
    const char *word = arg;
    while (*word == '-')
        word++;
    char key[64];
    size_t klen = strcspn(word, "=");
    hyphens(word, klen, key, sizeof key);
    const char *close = arg[0] == '-' ? ly_closest_word(key, names, n) : NULL;
    if (close)
        return ly_cli_usage_error_code(command, "config_unknown_key",
                                       "unexpected argument '%s'; did you mean '--%s'?", arg,
                                       close);
    return ly_cli_usage_error_code(command, "config_unknown_key", "unexpected argument '%s'", arg);
}
