/* SPDX-License-Identifier: MIT */
/* The program + sidecar pair committed as one unit (see commit.h). */
#include "pte/commit.h"

#include "core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define JOURNAL_MAGIC "libreyolo-export-commit 1"
#define MAX_NAME 1024

/* ---- failure injection --------------------------------------------------- */

static _Thread_local struct {
    int at, also, count, err;
    ly_pte_fault_mode mode;
    bool crashed;
} fault;

void ly_pte_fault_inject(int at, ly_pte_fault_mode mode, int err)
{
    fault.at = at;
    fault.mode = mode;
    fault.err = err ? err : EIO;
    fault.also = 0;
    fault.count = 0;
    fault.crashed = false;
}

void ly_pte_fault_also(int at)
{
    fault.also = at;
}

int ly_pte_fault_steps(void)
{
    return fault.count;
}

/* 0 to go ahead; -1 (errno set) when this step is to fail. */
static int step(void)
{
    if (fault.crashed) {
        errno = EIO;
        return -1;
    }
    fault.count++;
    if (fault.at > 0 && fault.count == fault.at) {
        if (fault.mode == LY_PTE_FAULT_CRASH) fault.crashed = true;
        errno = fault.mode == LY_PTE_FAULT_CRASH ? EIO : fault.err;
        return -1;
    }
    if (fault.also > 0 && fault.count == fault.also) {
        errno = fault.err;
        return -1;
    }
    return 0;
}

static ly_status crashed_status(void)
{
    return ly_set_error(LY_E_INTERNAL, "export commit: simulated crash at step %d", fault.at);
}

static int x_rename(const char *from, const char *to)
{
    return step() ? -1 : rename(from, to);
}

static int x_unlink(const char *path)
{
    return step() ? -1 : unlink(path);
}

/* Write all of `bytes` to a new file `path` (O_EXCL), fsync and close it. */
static int x_write_new(const char *path, const void *bytes, size_t n)
{
    if (step()) return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    int rc = 0;
    if (step()) {
        rc = -1;
    } else {
        const unsigned char *p = bytes;
        while (n > 0) {
            ssize_t put = write(fd, p, n);
            if (put < 0 && errno == EINTR) continue;
            if (put <= 0) {
                if (put == 0) errno = EIO;
                rc = -1;
                break;
            }
            p += put;
            n -= (size_t)put;
        }
    }
    if (rc == 0 && (step() || fsync(fd) != 0)) rc = -1;
    int saved = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    errno = saved;
    return rc;
}

static int x_sync_dir(const char *dir)
{
    if (step()) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* ---- names ------------------------------------------------------------- */

/* snprintf for names whose lengths split_path has bounded. */
static void sfmt(char *out, size_t size, const char *fmt, ...) LY_PRINTF(3, 4);
static void sfmt(char *out, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
}

typedef struct names {
    char dir[MAX_NAME];
    char base[2][MAX_NAME]; /* program, sidecar */
} names;

static ly_status split_path(const char *program_path, names *n)
{
    const char *slash = strrchr(program_path, '/');
    const char *base = slash ? slash + 1 : program_path;
    if (!*base)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "export: output path '%s' names a directory",
                            program_path);
    size_t dlen = slash ? (size_t)(slash - program_path) : 0;
    if (dlen + 1 > sizeof n->dir || strlen(base) + 40 > MAX_NAME)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "export: output path '%s' is too long",
                            program_path);
    if (slash && dlen == 0)
        snprintf(n->dir, sizeof n->dir, "/");
    else if (slash)
        snprintf(n->dir, sizeof n->dir, "%.*s", (int)dlen, program_path);
    else
        snprintf(n->dir, sizeof n->dir, ".");
    for (const char *p = base; *p; p++)
        if (*p == '\t' || *p == '\n')
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "export: output file name '%s' contains a tab or newline",
                                program_path);
    sfmt(n->base[0], MAX_NAME, "%s", base);
    sfmt(n->base[1], MAX_NAME, "%s.json", base);
    return LY_OK;
}

static void join(const names *n, const char *base, char *out)
{
    sfmt(out, 2 * MAX_NAME, "%s/%s", n->dir, base);
}

/* ".<base>.<6 random chars><suffix>" not present in the directory yet. */
static void random_name(const char *base, const char *suffix, char *out)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    static _Thread_local uint64_t state;
    state += (uint64_t)t.tv_nsec ^ ((uint64_t)getpid() << 32) ^ 0x9E3779B97F4A7C15ull;
    char tag[7];
    uint64_t z = state;
    for (int i = 0; i < 6; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        tag[i] = alphabet[(z >> 33) % (sizeof alphabet - 1)];
    }
    tag[6] = '\0';
    state = z;
    sfmt(out, MAX_NAME, ".%s.%s%s", base, tag, suffix);
}

/* Is `name` ".<base>.XXXXXX<suffix>"? Journals name only such files. */
static bool is_aux_name(const char *name, const char *base, const char *suffix)
{
    size_t nb = strlen(base), ns = strlen(suffix), n = strlen(name);
    if (n != 1 + nb + 1 + 6 + ns || name[0] != '.') return false;
    if (strncmp(name + 1, base, nb) != 0 || name[1 + nb] != '.') return false;
    for (size_t i = 0; i < 6; i++) {
        char c = name[2 + nb + i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return strcmp(name + 2 + nb + 6, suffix) == 0;
}

static bool exists(const char *path)
{
    struct stat s;
    return lstat(path, &s) == 0;
}

static ly_status mkdir_parents(const char *dir)
{
    char buf[MAX_NAME];
    sfmt(buf, sizeof buf, "%s", dir);
    size_t len = strlen(buf);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        struct stat s;
        if (stat(buf, &s) != 0) {
            if (step() || (mkdir(buf, 0777) != 0 && errno != EEXIST)) {
                if (fault.crashed) return crashed_status();
                return ly_set_error(LY_E_IO, "export: cannot create directory %s: %s", buf,
                                    strerror(errno));
            }
        } else if (!S_ISDIR(s.st_mode)) {
            return ly_set_error(LY_E_IO, "export: %s exists and is not a directory", buf);
        }
        buf[i] = saved;
    }
    return LY_OK;
}

/* ---- the journal ----------------------------------------------------------- */

typedef struct entry {
    char staged[MAX_NAME]; /* "" when none */
    char backup[MAX_NAME]; /* "" when the target did not exist */
} entry;

/* The journal, and the one name it is written under before it is renamed
 * into place: fixed, so that recovery can remove what a process killed
 * between the two left behind (it never counts as a journal). */
static void journal_paths(const names *n, char *journal, char *staged)
{
    char base[MAX_NAME];
    sfmt(base, sizeof base, ".%s.commit", n->base[0]);
    join(n, base, journal);
    sfmt(base, sizeof base, ".%s.commit.tmp", n->base[0]);
    join(n, base, staged);
}

static ly_status write_journal(const names *n, const char *state, const entry e[2])
{
    char text[6 * MAX_NAME + 128];
    int len = snprintf(text, sizeof text, JOURNAL_MAGIC "\nstate %s\n", state);
    for (int i = 0; i < 2; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "file %s\t%s\t%s\n", n->base[i],
                        e[i].staged, e[i].backup);
    char jpath[2 * MAX_NAME], tpath[2 * MAX_NAME];
    journal_paths(n, jpath, tpath);
    if (x_write_new(tpath, text, (size_t)len) != 0) {
        int err = errno;
        if (!fault.crashed) unlink(tpath);
        if (fault.crashed) return crashed_status();
        return ly_set_error(LY_E_IO, "export: cannot write the commit journal %s: %s", tpath,
                            strerror(err));
    }
    if (x_rename(tpath, jpath) != 0 || x_sync_dir(n->dir) != 0) {
        int err = errno;
        if (fault.crashed) return crashed_status();
        unlink(tpath);
        return ly_set_error(LY_E_IO, "export: cannot install the commit journal %s: %s", jpath,
                            strerror(err));
    }
    return LY_OK;
}

static ly_status remove_journal(const names *n)
{
    char jpath[2 * MAX_NAME], tpath[2 * MAX_NAME];
    journal_paths(n, jpath, tpath);
    if ((x_unlink(jpath) != 0 && errno != ENOENT) || x_sync_dir(n->dir) != 0) {
        if (fault.crashed) return crashed_status();
        return ly_set_error(LY_E_IO, "export: cannot remove the commit journal %s: %s", jpath,
                            strerror(errno));
    }
    return LY_OK;
}

/* Parse a journal strictly: it may only name the pair and its own auxiliary
 * files, so a hostile one cannot make recovery touch anything else. */
static ly_status read_journal(const names *n, const char *jpath, bool *committed, entry e[2])
{
    FILE *f = fopen(jpath, "rb");
    if (!f)
        return ly_set_error(LY_E_IO, "export: cannot read the commit journal %s: %s", jpath,
                            strerror(errno));
    char text[6 * MAX_NAME + 256];
    size_t len = fread(text, 1, sizeof text - 1, f);
    bool too_long = !feof(f);
    fclose(f);
    text[len] = '\0';
    ly_status bad = ly_set_error(LY_E_FORMAT,
                                 "export: commit journal %s is malformed; remove it after "
                                 "checking %s/%s and its sidecar by hand",
                                 jpath, n->dir, n->base[0]);
    if (too_long || strlen(text) != len) return bad;
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    if (!line || strcmp(line, JOURNAL_MAGIC) != 0) return bad;
    line = strtok_r(NULL, "\n", &save);
    if (!line) return bad;
    if (strcmp(line, "state pending") == 0)
        *committed = false;
    else if (strcmp(line, "state committed") == 0)
        *committed = true;
    else
        return bad;
    for (int i = 0; i < 2; i++) {
        line = strtok_r(NULL, "\n", &save);
        if (!line || strncmp(line, "file ", 5) != 0) return bad;
        char *fields[3] = {line + 5, NULL, NULL};
        for (int k = 1; k < 3; k++) {
            char *tab = strchr(fields[k - 1], '\t');
            if (!tab) return bad;
            *tab = '\0';
            fields[k] = tab + 1;
        }
        if (strchr(fields[2], '\t') || strcmp(fields[0], n->base[i]) != 0) return bad;
        if (*fields[1] && !is_aux_name(fields[1], n->base[i], ".tmp")) return bad;
        if (*fields[2] && !is_aux_name(fields[2], n->base[i], ".backup")) return bad;
        sfmt(e[i].staged, MAX_NAME, "%s", fields[1]);
        sfmt(e[i].backup, MAX_NAME, "%s", fields[2]);
    }
    if (strtok_r(NULL, "\n", &save)) return bad;
    return LY_OK;
}

static ly_status recover(const names *n, bool *recovered)
{
    if (recovered) *recovered = false;
    char jpath[2 * MAX_NAME], tpath[2 * MAX_NAME];
    journal_paths(n, jpath, tpath);
    if (exists(tpath) && x_unlink(tpath) != 0 && errno != ENOENT) goto io_error;
    if (!exists(jpath)) return LY_OK;
    bool committed = false;
    entry e[2];
    ly_status st = read_journal(n, jpath, &committed, e);
    if (st != LY_OK) return st;
    char path[2 * MAX_NAME], target[2 * MAX_NAME];
    for (int i = 1; i >= 0; i--) {
        join(n, n->base[i], target);
        if (committed) {
            if (*e[i].backup) {
                join(n, e[i].backup, path);
                if (x_unlink(path) != 0 && errno != ENOENT) goto io_error;
            }
        } else if (*e[i].backup) {
            /* Moved aside: put it back over whatever the commit put there. */
            join(n, e[i].backup, path);
            if (exists(path) && x_rename(path, target) != 0) goto io_error;
        } else if (x_unlink(target) != 0 && errno != ENOENT) {
            /* There was no target before: anything there now is the new file. */
            goto io_error;
        }
        if (*e[i].staged) {
            join(n, e[i].staged, path);
            if (x_unlink(path) != 0 && errno != ENOENT) goto io_error;
        }
    }
    if (x_sync_dir(n->dir) != 0) goto io_error;
    st = remove_journal(n);
    if (st == LY_OK && recovered) *recovered = true;
    if (st == LY_OK)
        ly_log(LY_LOG_WARNING, "export: finished an interrupted commit of %s/%s (%s)", n->dir,
               n->base[0], committed ? "kept the new pair" : "restored the previous pair");
    return st;
io_error:
    if (fault.crashed) return crashed_status();
    return ly_set_error(LY_E_IO,
                        "export: cannot finish the interrupted commit recorded in %s: %s (the "
                        "journal is kept; retry)",
                        jpath, strerror(errno));
}

ly_status ly_pte_recover(const char *program_path, bool *recovered)
{
    if (!program_path)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_recover: program_path is NULL");
    names n;
    ly_status st = split_path(program_path, &n);
    if (st != LY_OK) return st;
    return recover(&n, recovered);
}

/* ---- the commit ------------------------------------------------------------ */

ly_status ly_pte_commit_pair(const char *program_path, const void *program, size_t program_size,
                             const void *sidecar, size_t sidecar_size)
{
    names n;
    ly_status st = split_path(program_path, &n);
    if (st != LY_OK) return st;
    st = mkdir_parents(n.dir);
    if (st != LY_OK) return st;
    st = recover(&n, NULL);
    if (st != LY_OK) return st;

    const void *data[2] = {program, sidecar};
    size_t size[2] = {program_size, sidecar_size};
    entry e[2] = {{"", ""}, {"", ""}};
    bool moved[2] = {false, false}, placed[2] = {false, false};
    char path[2 * MAX_NAME], target[2 * MAX_NAME];

    /* Every name the commit will create is chosen and journaled before the
     * first file exists, so recovery after a kill at any step knows them all. */
    for (int i = 0; i < 2; i++) {
        join(&n, n.base[i], target);
        do {
            random_name(n.base[i], ".tmp", e[i].staged);
            join(&n, e[i].staged, path);
        } while (exists(path));
        if (!exists(target)) continue;
        do {
            random_name(n.base[i], ".backup", e[i].backup);
            join(&n, e[i].backup, path);
        } while (exists(path));
    }
    st = write_journal(&n, "pending", e);
    if (st != LY_OK) goto rollback;
    /* Stage: program first, then the sidecar. */
    for (int i = 0; i < 2; i++) {
        join(&n, e[i].staged, path);
        if (x_write_new(path, data[i], size[i]) != 0) {
            int err = errno;
            if (fault.crashed) return crashed_status();
            st = ly_set_error(LY_E_IO, "export: cannot write %s: %s", path, strerror(err));
            goto rollback;
        }
    }
    /* Swap: program first, then the sidecar. */
    for (int i = 0; i < 2; i++) {
        join(&n, n.base[i], target);
        if (*e[i].backup) {
            join(&n, e[i].backup, path);
            if (x_rename(target, path) != 0) {
                int err = errno;
                if (fault.crashed) return crashed_status();
                st = ly_set_error(LY_E_IO, "export: cannot move %s aside to %s: %s", target, path,
                                  strerror(err));
                goto rollback;
            }
            moved[i] = true;
        }
        join(&n, e[i].staged, path);
        if (x_rename(path, target) != 0) {
            int err = errno;
            if (fault.crashed) return crashed_status();
            st = ly_set_error(LY_E_IO, "export: cannot move %s onto %s: %s", path, target,
                              strerror(err));
            goto rollback;
        }
        placed[i] = true;
        e[i].staged[0] = '\0';
    }
    if (x_sync_dir(n.dir) != 0) {
        int err = errno;
        if (fault.crashed) return crashed_status();
        st = ly_set_error(LY_E_IO, "export: cannot sync directory %s: %s", n.dir, strerror(err));
        goto rollback;
    }
    st = write_journal(&n, "committed", e);
    if (st != LY_OK) goto rollback;

    /* Committed: what follows only tidies up. The journal goes last, so a
     * backup that cannot be removed now is removed by the next recovery. */
    bool tidy = true;
    for (int i = 0; i < 2; i++)
        if (*e[i].backup) {
            join(&n, e[i].backup, path);
            if (x_unlink(path) != 0 && errno != ENOENT) tidy = false;
            if (fault.crashed) return crashed_status();
        }
    if (tidy && remove_journal(&n) != LY_OK && fault.crashed) return crashed_status();
    ly_clear_error();
    return LY_OK;

rollback:
    if (fault.crashed) return crashed_status();
    {
        char cause[1024];
        snprintf(cause, sizeof cause, "%s", ly_last_error());
        char retained[4 * MAX_NAME + 8] = "";
        bool complete = true;
        for (int i = 1; i >= 0; i--) {
            join(&n, n.base[i], target);
            if (placed[i] && x_unlink(target) != 0 && errno != ENOENT) complete = false;
            if (moved[i]) {
                join(&n, e[i].backup, path);
                if (x_rename(path, target) != 0) {
                    complete = false;
                    if (*retained) strcat(retained, ", ");
                    strcat(retained, path);
                } else {
                    e[i].backup[0] = '\0';
                }
            }
        }
        if (fault.crashed) return crashed_status();
        for (int i = 0; i < 2; i++)
            if (*e[i].staged) {
                join(&n, e[i].staged, path);
                unlink(path);
            }
        if (complete) {
            (void)remove_journal(&n);
            if (fault.crashed) return crashed_status();
            return ly_set_error(st, "%s", cause);
        }
        if (!*retained) sfmt(retained, sizeof retained, "(none)");
        return ly_set_error(LY_E_IO,
                            "ExecuTorch artifact commit failed and rollback was incomplete. "
                            "Recovery backups were retained at: %s (caused by: %s)",
                            retained, cause);
    }
}
