// test_step_guard: dev/trainer/train_common.h's decision whether a training step updates (step_guard_decide,
// outlier_window_push) and its run-file rule for -o (is_run_file), on the CPU, without a model.
// Both trainers call these; the trainer tests (dev/test/test_loop.sh, test_gpt2.cu) check the wiring.
//
//   g++ -O1 -std=c++17 -I. dev/test/test_step_guard.cpp -o build/test_step_guard && ./build/test_step_guard
//
// One "PASS loop step_guard ..." / "FAIL ..." line per check; exit 1 on any FAIL.
#define PRECISION_NAME "fp32"
#define PRECISION_IS_BF16 0
#define TRAIN_COMMON_CUDA 0
#include "../trainer/train_common.h"

static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size) { return 1; }

static int failures = 0;
static void check(int ok, const char* what, const char* detail) {
    printf("%s loop step_guard %s%s%s\n", ok ? "PASS" : "FAIL", what, detail[0] ? ": " : "", detail);
    failures += !ok;
}

// z of x against values (population std), the definition outlier_window_push must follow
static double direct_z(const std::vector<double>& values, double x) {
    double mean = 0.0, var = 0.0;
    for (double v : values) { mean += v; }
    mean /= values.size();
    for (double v : values) { var += (v - mean) * (v - mean); }
    return (x - mean) / sqrt(var / values.size());
}

int main(void) {
    char line[1024], detail[2048];

    // the window: NAN until OUTLIER_WINDOW values, then the z against the previous OUTLIER_WINDOW
    {
        OutlierWindow w;
        memset(&w, 0, sizeof(w));
        std::vector<double> seen;
        int nan_while_filling = 1;
        for (int i = 0; i < OUTLIER_WINDOW; i++) {
            const double x = 3.0 + 0.01 * ((i * 37) % 11);
            nan_while_filling &= isnan(outlier_window_push(&w, x));
            seen.push_back(x);
        }
        const double z1 = outlier_window_push(&w, 3.5);
        const double want1 = direct_z(seen, 3.5);
        seen.erase(seen.begin());
        seen.push_back(3.5);
        // a NaN is not scored and does not enter: the next z is as if it never came
        const double zn = outlier_window_push(&w, NAN);
        const double zi = outlier_window_push(&w, INFINITY);
        const double z2 = outlier_window_push(&w, 2.9);
        const double want2 = direct_z(seen, 2.9);
        snprintf(detail, sizeof(detail), "z %.6f (direct %.6f), after NaN/Inf %.6f (direct %.6f), NaN/Inf scored %g/%g",
                 z1, want1, z2, want2, zn, zi);
        check(nan_while_filling && fabs(z1 - want1) < 1e-9 && fabs(z2 - want2) < 1e-9 && isnan(zn) && isnan(zi),
              "window (NAN for the first 128 values, then the z against the previous 128; NaN/Inf never enter)", detail);
        OutlierWindow c;
        memset(&c, 0, sizeof(c));
        for (int i = 0; i < OUTLIER_WINDOW; i++) { outlier_window_push(&c, 1.0); }
        const double zc = outlier_window_push(&c, 100.0);
        snprintf(detail, sizeof(detail), "z %g", zc);
        check(zc == 0.0, "window of equal values (z 0, as llm.c: no spread to judge by)", detail);
    }

    // outlier skipping: off by default (0), -sl for the loss, -sg for the norm
    {
        StepGuard off, sl, sg;
        step_guard_init(&off, 0);
        step_guard_init(&sl, 0);
        step_guard_init(&sg, 0);
        int step = 0, all_update = 1;
        for (int i = 0; i < OUTLIER_WINDOW; i++) {
            step++;
            const double loss = 5.0 + 0.1 * (i % 5), norm = 1.0 + 0.05 * (i % 3);
            all_update &= step_guard_decide(&off, 0.0f, 0.0f, step, loss, norm, line, sizeof(line)) == STEP_UPDATE;
            all_update &= step_guard_decide(&sl, 3.0f, 0.0f, step, loss, norm, line, sizeof(line)) == STEP_UPDATE;
            all_update &= step_guard_decide(&sg, 0.0f, 3.0f, step, loss, norm, line, sizeof(line)) == STEP_UPDATE;
        }
        step++;
        const StepAction a_off = step_guard_decide(&off, 0.0f, 0.0f, step, 50.0, 40.0, line, sizeof(line));
        const StepAction a_sl = step_guard_decide(&sl, 3.0f, 0.0f, step, 50.0, 1.0, line, sizeof(line));
        const int sl_line = strstr(line, "skip step 129: loss 50.000000 is") != NULL && strstr(line, "(-sl 3)") != NULL;
        char sl_text[1024];
        snprintf(sl_text, sizeof(sl_text), "%s", line);
        const StepAction a_sg = step_guard_decide(&sg, 0.0f, 3.0f, step, 5.1, 40.0, line, sizeof(line));
        const int sg_line = strstr(line, "skip step 129: gradient norm 40.0000 is") != NULL && strstr(line, "(-sg 3)") != NULL;
        // a value inside the spread passes
        const StepAction a_sl_ok = step_guard_decide(&sl, 3.0f, 0.0f, step + 1, 5.2, 1.0, line, sizeof(line));
        snprintf(detail, sizeof(detail), "off %d, -sl %d (%s), -sg %d, normal %d, skipped %d/%d/%d", a_off, a_sl, sl_text, a_sg,
                 a_sl_ok, off.skipped, sl.skipped, sg.skipped);
        check(all_update && a_off == STEP_UPDATE && a_sl == STEP_SKIP && sl_line && a_sg == STEP_SKIP && sg_line &&
              a_sl_ok == STEP_UPDATE && off.skipped == 0 && sl.skipped == 1 && sg.skipped == 1,
              "outliers (off by default; -sl/-sg skip a step 3 sd above the window, with a line naming the flag)", detail);
    }

    // non-finite steps: skipped with a line, NONFINITE_STEPS_MAX in a row stop; a finite step resets the count
    {
        StepGuard g;
        step_guard_init(&g, 7); // a resumed run continues the count of its state file
        int step = 0, ok = 1;
        for (int i = 0; i < NONFINITE_STEPS_MAX - 1; i++) {
            ok &= step_guard_decide(&g, 0.0f, 0.0f, ++step, NAN, 1.0, line, sizeof(line)) == STEP_SKIP;
        }
        ok &= strstr(line, "skip step 4: the loss (nan) is not finite: no update (4 in a row") != NULL;
        ok &= step_guard_decide(&g, 0.0f, 0.0f, ++step, 4.0, 1.0, line, sizeof(line)) == STEP_UPDATE && line[0] == '\0';
        for (int i = 0; i < NONFINITE_STEPS_MAX - 1; i++) {
            ok &= step_guard_decide(&g, 0.0f, 0.0f, ++step, 4.0, INFINITY, line, sizeof(line)) == STEP_SKIP;
        }
        ok &= strstr(line, "the gradient norm (inf) is not finite") != NULL;
        const StepAction last = step_guard_decide(&g, 0.0f, 0.0f, ++step, NAN, NAN, line, sizeof(line));
        snprintf(detail, sizeof(detail), "skipped %d (7 before + %d), stop line: %s", g.skipped, 2 * NONFINITE_STEPS_MAX - 1, line);
        check(ok && last == STEP_STOP && g.skipped == 7 + 2 * NONFINITE_STEPS_MAX - 1 &&
              strstr(line, "error: step 10: the loss (nan) and the gradient norm (nan) are not finite, as in each of steps 6-10") != NULL,
              "non-finite (skipped with a line; 5 in a row stop; a good step resets the count)", detail);
    }

    // the files that make an -o another run's
    {
        const char* yes[] = {"main.log", "model_00000010.bin", "state_00000010.bin", "model_00000010.bin.tmp", "state_1.bin"};
        const char* no[] = {"cmd.txt", "stdout.log", "DONE", "model_.bin", "model_12.binx", "main.log.old", "notes_model_1.bin"};
        int ok = 1;
        for (const char* n : yes) { ok &= is_run_file(n); }
        for (const char* n : no) { ok &= !is_run_file(n); }
        check(ok, "run files (main.log, model_N.bin, state_N.bin and their .tmp; not cmd.txt, stdout.log, DONE)", "");
    }
    return failures > 0 ? 1 : 0;
}
