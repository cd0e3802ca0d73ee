/* SPDX-License-Identifier: MIT */
/*
 * What a predict source names (ly_source_list_expand, libreyolo/image.h): the
 * one reading of a source for the command and the Python package, as
 * LibreYOLO's predict reads one (a file, a folder and its subfolders, a glob,
 * a .txt list, a URL).
 */
#include "core/core.h"
#include "libreyolo/image.h"
#include "libreyolo/video.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define MAX_FOLDER_DEPTH 16

static bool has_extension(const char *name, const char *const *exts, size_t n_exts)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < n_exts; i++) {
        size_t m = strlen(exts[i]);
        if (n > m && strcasecmp(name + n - m, exts[i]) == 0) return true;
    }
    return false;
}

static bool is_image_name(const char *name)
{
    static const char *const exts[] = {".jpg", ".jpeg", ".png", ".bmp"};
    return has_extension(name, exts, sizeof exts / sizeof exts[0]);
}

/* Images LibreYOLO reads (through PIL) that this build does not. */
static bool is_unsupported_image_name(const char *name)
{
    static const char *const exts[] = {".webp", ".tif", ".tiff", ".gif"};
    return has_extension(name, exts, sizeof exts / sizeof exts[0]);
}

static bool is_url(const char *source)
{
    return strncmp(source, "http://", 7) == 0 || strncmp(source, "https://", 8) == 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct growing {
    ly_source_list *l;
    size_t cap;
} growing;

static ly_status add_source(growing *g, const char *path)
{
    ly_source_list *l = g->l;
    if (l->count == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        char **grown = realloc(l->paths, cap * sizeof *grown);
        if (!grown) return ly_set_error(LY_E_NO_MEMORY, "sources: out of memory");
        l->paths = grown, g->cap = cap;
    }
    if (!(l->paths[l->count] = strdup(path)))
        return ly_set_error(LY_E_NO_MEMORY, "sources: out of memory");
    l->count++;
    return LY_OK;
}

/* The images of a folder and its subfolders (LibreYOLO globs every path
 * below the folder), in path order. Only the folder given (depth 0) must
 * hold some. */
static ly_status add_folder(growing *g, const char *folder, int depth)
{
    DIR *dir = opendir(folder);
    if (!dir) return ly_set_error(LY_E_NOT_FOUND, "%s: cannot list: %s", folder, strerror(errno));
    size_t first = g->l->count;
    bool slash = folder[strlen(folder) - 1] == '/';
    struct dirent *e;
    ly_status st = LY_OK;
    while (st == LY_OK && (e = readdir(dir))) {
        if (e->d_name[0] == '.') continue;
        size_t len = strlen(folder) + strlen(e->d_name) + 2;
        char *path = malloc(len);
        if (!path) {
            st = ly_set_error(LY_E_NO_MEMORY, "sources: out of memory");
            break;
        }
        snprintf(path, len, "%s%s%s", folder, slash ? "" : "/", e->d_name);
        struct stat sb;
        if (is_image_name(e->d_name))
            st = add_source(g, path);
        else if (is_unsupported_image_name(e->d_name))
            g->l->skipped++;
        else if (depth < MAX_FOLDER_DEPTH && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            st = add_folder(g, path, depth + 1);
        free(path);
    }
    closedir(dir);
    if (st != LY_OK) return st;
    if (g->l->count == first && depth == 0)
        return ly_set_error(LY_E_NOT_FOUND, "%s: no .jpg, .jpeg, .png or .bmp images in it%s",
                            folder,
                            g->l->skipped ? " (only formats this build does not read)" : "");
    qsort(g->l->paths + first, g->l->count - first, sizeof *g->l->paths, compare_names);
    return LY_OK;
}

static ly_status add_path(growing *g, const char *path, bool listed);

/* A text file listing sources, one per line ('#' comments, blank lines skipped). */
static ly_status add_listed(growing *g, const char *list_path)
{
    FILE *f = fopen(list_path, "r");
    if (!f) return ly_set_error(LY_E_NOT_FOUND, "%s: %s", list_path, strerror(errno));
    char line[PATH_MAX + 2];
    ly_status st = LY_OK;
    size_t before = g->l->count;
    int line_no = 0;
    while (st == LY_OK && fgets(line, sizeof line, f)) {
        line_no++;
        line[strcspn(line, "\r\n")] = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#') continue;
        struct stat sb;
        if (!is_url(p) && stat(p, &sb) != 0)
            st = ly_set_error(LY_E_NOT_FOUND, "%s line %d: Source not found: %s", list_path,
                              line_no, p);
        else
            st = add_path(g, p, true);
    }
    fclose(f);
    if (st == LY_OK && g->l->count == before)
        return ly_set_error(LY_E_NOT_FOUND, "%s: lists no images", list_path);
    return st;
}

static ly_status add_path(growing *g, const char *path, bool listed)
{
    if (is_url(path)) return add_source(g, path);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int err = errno;
        /* a glob, as a shell that did not expand it (quoted) hands it over */
        if (!listed && strpbrk(path, "*?[")) {
            glob_t gl;
            int r = glob(path, 0, NULL, &gl);
            ly_status st = LY_OK;
            size_t images = 0;
            for (size_t i = 0; r == 0 && st == LY_OK && i < gl.gl_pathc; i++)
                if (is_image_name(gl.gl_pathv[i]))
                    st = add_source(g, gl.gl_pathv[i]), images++;
                else if (is_unsupported_image_name(gl.gl_pathv[i]))
                    g->l->skipped++;
            globfree(&gl);
            if (st != LY_OK || images) return st;
        }
        return ly_set_error(LY_E_NOT_FOUND, "Source not found: %s (%s)", path,
                            err == ENOENT ? "no such file or directory" : strerror(err));
    }
    if (S_ISDIR(sb.st_mode)) return add_folder(g, path, 0);
    if (!listed && has_extension(path, (const char *const[]){".txt"}, 1))
        return add_listed(g, path);
    bool video = false;
    ly_video_is_source(path, &video);
    if (video)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: a video source: it is read frame by frame (ly_video_open, "
                            "libreyolo/video.h; predict does that), not listed as images",
                            path);
    if (is_unsupported_image_name(path))
        return ly_set_error(LY_E_FORMAT,
                            "%s: this build reads JPEG, PNG and BMP images; WebP, TIFF and GIF "
                            "are not supported in this build",
                            path);
    return add_source(g, path);
}

ly_status ly_source_list_expand(const char *source, ly_source_list *out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_source_list_expand: out is NULL");
    *out = (ly_source_list){0};
    if (!source || !*source)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_source_list_expand: no source given");
    growing g = {out, 0};
    ly_status st = add_path(&g, source, false);
    if (st != LY_OK) ly_source_list_free(out);
    return st;
}

ly_status ly_source_list_free(ly_source_list *list)
{
    if (!list) return LY_OK;
    for (size_t i = 0; i < list->count; i++)
        free(list->paths[i]);
    free(list->paths);
    *list = (ly_source_list){0};
    return LY_OK;
}
