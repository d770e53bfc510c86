/*
dev/trainer/step_guard.h: whether a step's update is applied, in both trainers: a step whose loss or
gradient norm is not finite, or (-sl, -sg) far above the last 128 steps', skips its update; five
non-finite steps in a row stop the run.
*/
#ifndef DEV_TRAINER_STEP_GUARD_H
#define DEV_TRAINER_STEP_GUARD_H

#include "host.h"

// ----------------------------------------------------------------------------
// bad steps: the decision, after the backward pass and before AdamW, whether a step's update is
// applied (both trainers: the gradient norm first, then step_guard_decide, then the update or not)

// llm.c's window (llmc/outlier_detector.h): the last 128 steps
#define OUTLIER_WINDOW 128
// Non-finite steps in a row that stop the run. A skipped step leaves the model as it was, so only
// the data changes from one attempt to the next: one bad batch (an fp overflow on rare data) is
// skipped and the run goes on, but five batches in a row failing the same way mean the model or the
// learning rate is broken (NaN/Inf weights, a diverged run), and every further step would fail too.
#define NONFINITE_STEPS_MAX 5

// The last OUTLIER_WINDOW finite values of a series (a ring).
typedef struct {
    double values[OUTLIER_WINDOW];
    int count; // values held, up to OUTLIER_WINDOW
    int next;  // where the next value goes
} OutlierWindow;

// The z-score of x against the values already in the window: (x - mean) / std (population std),
// NAN while the window is not yet full (as llm.c: too few values to judge), 0 when all values are
// equal. Then x joins the window, dropping the oldest; a non-finite x returns NAN and is not
// added, so one NaN step cannot poison the window. Unlike llm.c, x is scored against the window
// before it joins: an outlier does not widen the spread it is measured against. Mean and variance
// are summed afresh each time (128 values): no running sums that drift.
static double outlier_window_push(OutlierWindow* w, double x) {
    if (!isfinite(x)) { return NAN; }
    double z = NAN;
    if (w->count == OUTLIER_WINDOW) {
        double mean = 0.0;
        for (int i = 0; i < OUTLIER_WINDOW; i++) { mean += w->values[i]; }
        mean /= OUTLIER_WINDOW;
        double var = 0.0;
        for (int i = 0; i < OUTLIER_WINDOW; i++) { var += (w->values[i] - mean) * (w->values[i] - mean); }
        const double sd = sqrt(var / OUTLIER_WINDOW);
        z = sd > 0.0 ? (x - mean) / sd : 0.0;
    }
    w->values[w->next] = x;
    w->next = (w->next + 1) % OUTLIER_WINDOW;
    if (w->count < OUTLIER_WINDOW) { w->count++; }
    return z;
}

typedef struct {
    OutlierWindow loss, norm;
    int nonfinite_in_a_row;
    int skipped; // steps whose update was skipped, this run and the runs it resumes (TrainState.skipped)
} StepGuard;

typedef enum { STEP_UPDATE = 0, STEP_SKIP = 1, STEP_STOP = 2 } StepAction;

// A resumed run continues the count of skipped steps; the outlier windows start empty (they are not
// in the state file), so -sl/-sg judge again from the 129th step after a resume.
static void step_guard_init(StepGuard* g, int skipped) {
    memset(g, 0, sizeof(*g));
    g->skipped = skipped;
}

// Whether step `step` (1-based, as its log line) applies its update, from its mean loss and its
// gradient norm before clipping:
//   STEP_UPDATE   apply it; AdamW's t is then step - g->skipped
//   STEP_SKIP     a non-finite loss or norm, or a z-score above -sl / -sg (> 0): no update; *line
//                 says which, for stdout and main.log
//   STEP_STOP     the NONFINITE_STEPS_MAX-th non-finite step in a row: *line is the error
// Every finite loss and norm joins its window, skipped or not (as llm.c): a lasting change of level
// becomes the new normal instead of skipping every step after it.
static StepAction step_guard_decide(StepGuard* g, float skip_loss_z, float skip_grad_z, int step, double loss, double norm,
                                    char* line, size_t line_size) {
    line[0] = '\0';
    const double zl = outlier_window_push(&g->loss, loss);
    const double zg = outlier_window_push(&g->norm, norm);
    if (!isfinite(loss) || !isfinite(norm)) {
        g->nonfinite_in_a_row++;
        g->skipped++;
        char what[128];
        if (!isfinite(loss) && !isfinite(norm)) { snprintf(what, sizeof(what), "the loss (%g) and the gradient norm (%g) are", loss, norm); }
        else if (!isfinite(loss)) { snprintf(what, sizeof(what), "the loss (%g) is", loss); }
        else { snprintf(what, sizeof(what), "the gradient norm (%g) is", norm); }
        if (g->nonfinite_in_a_row >= NONFINITE_STEPS_MAX) {
            snprintf(line, line_size, "error: step %d: %s not finite, as in each of steps %d-%d: %d steps in a row, stopping "
                     "the run (HINT: lower -l, or check the model file for NaN/Inf weights)", step, what,
                     step - g->nonfinite_in_a_row + 1, step, g->nonfinite_in_a_row);
            return STEP_STOP;
        }
        snprintf(line, line_size, "skip step %d: %s not finite: no update (%d in a row; %d in a row stop the run)", step, what,
                 g->nonfinite_in_a_row, NONFINITE_STEPS_MAX);
        return STEP_SKIP;
    }
    g->nonfinite_in_a_row = 0;
    if (skip_loss_z > 0.0f && isfinite(zl) && zl > skip_loss_z) {
        g->skipped++;
        snprintf(line, line_size, "skip step %d: loss %.6f is %.2f standard deviations above the mean of the last %d steps "
                 "(-sl %g): no update", step, loss, zl, OUTLIER_WINDOW, (double)skip_loss_z);
        return STEP_SKIP;
    }
    if (skip_grad_z > 0.0f && isfinite(zg) && zg > skip_grad_z) {
        g->skipped++;
        snprintf(line, line_size, "skip step %d: gradient norm %.4f is %.2f standard deviations above the mean of the last %d "
                 "steps (-sg %g): no update", step, norm, zg, OUTLIER_WINDOW, (double)skip_grad_z);
        return STEP_SKIP;
    }
    return STEP_UPDATE;
}

// after a step's own line: the guard's line when it did not let the step update, on stdout (stderr
// when it stops the run) and in main.log
static void step_guard_report(StepAction action, const char* line, FILE* logf) {
    if (action == STEP_UPDATE) { return; }
    fprintf(action == STEP_STOP ? stderr : stdout, "%s\n", line);
    fflush(stdout);
    logf_line(logf, line);
}

// After the last step (not after a stop): a run whose last steps were all non-finite (fewer than
// NONFINITE_STEPS_MAX, or it would have stopped) applied no update at its end, and exit status 0
// would call it a success. Returns the exit status: 0, or 1 after the error line (stderr, main.log).
static int step_guard_finish(const StepGuard* g, int num_steps, FILE* logf) {
    if (g->nonfinite_in_a_row == 0) { return 0; }
    char line[512];
    snprintf(line, sizeof(line), "error: the run ended on %d non-finite step%s in a row (steps %d-%d): no update was "
             "applied for %s (HINT: lower -l, or check the model file for NaN/Inf weights)", g->nonfinite_in_a_row,
             g->nonfinite_in_a_row > 1 ? "s" : "", num_steps - g->nonfinite_in_a_row + 1, num_steps,
             g->nonfinite_in_a_row > 1 ? "them" : "it");
    fprintf(stderr, "%s\n", line);
    logf_line(logf, line);
    return 1;
}

#endif // DEV_TRAINER_STEP_GUARD_H
