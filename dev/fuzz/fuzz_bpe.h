// The property every target that loads a GPT-2 encoder checks on it (fuzz_bpe_files,
// fuzz_tokenizer_bin): ids stay in the vocabulary and decode(encode(x)) == x, which tokenizer.h
// promises for every byte string. Include after tokenizer.h and fuzz_common.h.
#pragma once

static void fuzz_check_round_trip(GPT2Encoder* enc, const std::string& text) {
    std::vector<int> ids = enc->encode(text);
    for (int id : ids) { FUZZ_CHECK(id >= 0 && (size_t)id < enc->vocab_size(), "id %d of %zu", id, enc->vocab_size()); }
    FUZZ_CHECK(enc->decode(ids) == text, "decode(encode(x)) != x for %zu bytes", text.size());
    FUZZ_CHECK(enc->decode(enc->encode_ordinary(text)) == text, "decode(encode_ordinary(x)) != x");
}
