/* SPDX-License-Identifier: MIT */
/*
 * The program + sidecar pair written as one unit (executorch.md A3), with a
 * journal so that a crash between the two swaps is undone on the next access.
 *
 * Upstream (LibreYOLO's _commit_artifact_pair): stage both files as hidden
 * temporaries next to their targets (written, fsynced), then for the program
 * and then the sidecar move an existing target to a hidden backup and the
 * staged file onto the target; on any error undo in reverse and restore the
 * backups, reporting retained backups if that fails; always remove leftover
 * temporaries, and the backups after success.
 *
 * What this adds: before the first file is staged, a journal
 * `.<program>.commit` naming every target, staged file and backup is written
 * atomically (through the fixed name `.<program>.commit.tmp`); after the second
 * swap it is atomically replaced by a "committed" one (the commit point), then
 * the backups and the journal are removed. ly_pte_recover (run at the start
 * of every commit and by the .pte loader before it reads the pair) finishes an
 * interrupted commit: a pending journal is rolled back (backups restored, new
 * targets and staged files removed), a committed one rolled forward (backups
 * removed), and a journal temporary is removed. So a
 * process killed at any instant leaves a state that the next reader turns into
 * the old pair or the new pair, never a mix, and nothing else. Renames are made durable with an
 * fsync of the directory after each step.
 */
#ifndef LY_PTE_COMMIT_H
#define LY_PTE_COMMIT_H

#include "libreyolo/libreyolo.h"

/* Write `program` to program_path and `sidecar` to program_path + ".json" as a
 * pair (parent directories created). */
ly_status ly_pte_commit_pair(const char *program_path, const void *program, size_t program_size,
                             const void *sidecar, size_t sidecar_size);

/* Finish an interrupted commit of `program_path`, if its journal says there is
 * one. LY_OK when there was nothing to do or it was finished; *recovered (may
 * be NULL) tells which. */
ly_status ly_pte_recover(const char *program_path, bool *recovered);

/* ---- Failure injection (tests) -------------------------------------------
 * Every file-system operation of a commit or recovery counts as one step. With
 * `at` > 0, step number `at` (1-based, counted from this call) fails: with
 * LY_PTE_FAULT_ERROR it fails as the system call would with `err` (e.g. ENOSPC)
 * and the commit handles it; with LY_PTE_FAULT_CRASH that step and every later one
 * does nothing, as if the process had died there, and the commit returns
 * LY_E_INTERNAL without rolling back. `at` 0 disables injection. The number
 * of steps counted since the last call is returned by ly_pte_fault_steps. */
typedef enum ly_pte_fault_mode { LY_PTE_FAULT_ERROR = 1, LY_PTE_FAULT_CRASH = 2 } ly_pte_fault_mode;
void ly_pte_fault_inject(int at, ly_pte_fault_mode mode, int err);
/* A second step that fails with `err` (for failures during a rollback); 0: none.
 * Call after ly_pte_fault_inject. */
void ly_pte_fault_also(int at);
int ly_pte_fault_steps(void);

#endif
