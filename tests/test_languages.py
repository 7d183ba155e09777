"""Text in any language, right by default: NFC before anything counts it, accents kept where stripping them would
merge words (Vietnamese, French, Japanese kana), BERT's uncased rule for English, and the sentence ends and
paragraphs of scripts other than Latin."""

from __future__ import annotations

import json
import unicodedata

import pytest

from bertforge.data.directory import data_stats
from bertforge.formats.corpus import read_paragraphs
from bertforge.formats.options import CorpusOptions
from bertforge.formats.text import split_sentences
from bertforge.tokenizer import accent_choice, load_tokenizer

from conftest import bertforge, bertforge_ok, make_documents, needs

# Student feedback, as the Vietnamese corpora BERT is pre-trained on by users of this project; bán, bàn, bạn and
# ban (sell, table, friend, committee) are four words that stripping the accents makes one.
VIETNAMESE = [
    "Giảng viên dạy rất nhiệt tình và có trách nhiệm.",
    "Bạn bán bàn cho tôi với giá rẻ.",
    "Môn học này rất bổ ích cho sinh viên.",
    "Thầy giáo giải thích bài giảng rất dễ hiểu.",
    "Cô giáo luôn quan tâm đến sinh viên.",
    "Phòng học quá nóng và thiếu quạt.",
    "Tài liệu học tập cần được cập nhật thường xuyên.",
    "Em rất thích cách giảng dạy của thầy.",
    "Bài tập về nhà quá nhiều so với thời gian.",
    "Giảng viên nên cho thêm ví dụ thực tế.",
    "Lớp học có không khí vui vẻ và thân thiện.",
    "Sinh viên cần được hỗ trợ nhiều hơn trong học kỳ này.",
    "Máy chiếu trong phòng học thường bị hỏng.",
    "Bàn ghế trong lớp đã cũ và hỏng nhiều.",
    "Bạn của tôi học rất giỏi môn toán.",
    "Cái bàn này được bán với giá cao.",
    "Ban cán sự lớp làm việc rất tốt.",
]
# Ten paragraphs of Chinese and Japanese, a sentence a line, a blank line between them: ten documents.
CJK = [
    ["我们今天去图书馆学习。", "图书馆里有很多书。", "我喜欢在那里看书。"],
    ["天气很好，我们去公园散步吧。", "公园里有很多花。"],
    ["今日は学校に行きます。", "友達と一緒に勉強します。", "先生はとても親切です。"],
    ["北京是中国的首都。", "那里有很多名胜古迹。"],
    ["私は毎朝コーヒーを飲みます。", "でも今日はお茶にしました。"],
    ["这家餐厅的菜很好吃！", "价格也不贵。", "我们下次再来吧？"],
    ["東京はとても大きな都市です。", "電車がたくさん走っています。"],
    ["他每天早上六点起床。", "然后去跑步。"],
    ["日本語の勉強は楽しいです。", "漢字は難しいですが、面白いです。"],
    ["明天会下雨吗？", "我不知道。", "我们带伞吧。"],
]


def write_lines(path, paragraphs, form="NFC"):
    text = "\n\n".join("\n".join(lines) for lines in paragraphs) + "\n"
    path.write_text(unicodedata.normalize(form, text), encoding="utf-8")


def test_vietnamese_keeps_its_diacritics_by_default_and_decomposed_text_is_the_same_text(tmp_path):
    write_lines(tmp_path / "vi.txt", [VIETNAMESE[i : i + 3] for i in range(0, len(VIETNAMESE), 3)] * 4)
    done = bertforge_ok("tokenizer", "train", tmp_path / "vi.txt", "--out", tmp_path / "tok", "--vocab-size", "300",
                        "--min-frequency", "1")  # fmt: skip
    assert "keeping accents: stripping them would merge" in done.stderr and "ban" in done.stderr
    tokenizer = load_tokenizer(tmp_path / "tok")
    assert tokenizer.encode("Giảng viên dạy rất nhiệt tình", add_special_tokens=False).tokens == [
        "giảng", "viên", "dạy", "rất", "nhiệt", "tình"
    ]  # fmt: skip
    words = ["bán", "bàn", "bạn", "ban"]
    assert len({tuple(tokenizer.encode(w, add_special_tokens=False).ids) for w in words}) == 4
    # The same text decomposed (NFD, as some editors write it) prepares to the same tokens, not to [UNK]s.
    write_lines(tmp_path / "vi_nfd.txt", [VIETNAMESE] * 3, form="NFD")
    bertforge_ok("prepare", tmp_path / "vi_nfd.txt", "--tokenizer", tmp_path / "tok", "--out", tmp_path / "data")
    assert data_stats(tmp_path / "data")["train"]["unk_rate"] < 0.01
    transformers = needs("transformers")
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    decomposed = unicodedata.normalize("NFD", VIETNAMESE[1])
    assert theirs(decomposed)["input_ids"] == tokenizer.encode(VIETNAMESE[1]).ids  # transformers applies NFC too


def test_english_keeps_berts_uncased_rule(tmp_path):
    sentences = [s for doc in make_documents(n_docs=20, sentences=5) for s in doc] + ["we met at the café."] * 3
    (tmp_path / "en.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    done = bertforge_ok("tokenizer", "train", tmp_path / "en.txt", "--out", tmp_path / "tok", "--vocab-size", "200",
                        "--min-frequency", "1", "--json")  # fmt: skip
    assert json.loads(done.stdout)["strip_accents"] is True
    assert load_tokenizer(tmp_path / "tok").encode("Café", add_special_tokens=False).tokens == ["cafe"]
    config = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    assert (config["do_lower_case"], config["strip_accents"]) == (True, True)  # as transformers reads it too
    kept = bertforge_ok("tokenizer", "train", tmp_path / "en.txt", "--out", tmp_path / "kept", "--vocab-size", "200",
                        "--min-frequency", "1", "--keep-accents", "--json")  # fmt: skip
    assert json.loads(kept.stdout)["strip_accents"] is False  # the flag overrides the corpus's choice
    assert load_tokenizer(tmp_path / "kept").encode("Café", add_special_tokens=False).tokens == ["café"]
    config = json.loads((tmp_path / "kept" / "tokenizer_config.json").read_text())
    assert (config["do_lower_case"], config["strip_accents"]) == (True, False)


@pytest.mark.parametrize(
    ("text", "keeps"),
    [
        (
            "Le garçon a été à la gare. Il a vu sa mère là-bas, où elle était. Où es-tu? Il est là. La fête a eu lieu.",
            True,
        ),
        ("がっこうにいきます。かっこういいです。ごはんをたべます。", True),  # kana: a voicing mark tells が from か
        ("한국어를 공부합니다. 학교에 갑니다.", True),  # stripping would take Hangul syllables apart
        ("The cat sat on the mat. The dog sat on the log by the river bank, near the café.", False),
    ],
)
def test_accents_are_kept_where_stripping_merges_words(text, keeps):
    choice = accent_choice([text] * 5)
    assert choice.strip is not keeps, choice.reason
    assert accent_choice([text], lowercase=False).strip is False  # cased: kept, as BERT cased


def test_cjk_paragraphs_are_documents_and_wrapped_cjk_lines_join_without_spaces(tmp_path):
    write_lines(tmp_path / "cjk.txt", CJK)
    paragraphs = list(read_paragraphs([tmp_path / "cjk.txt"]))
    assert sum(p.new_document for p in paragraphs) == 10
    wrapped = ["我们今天去图书", "馆学习，图书馆", "里有很多书。"]
    (tmp_path / "wrapped.txt").write_text("\n".join(wrapped) + "\n", encoding="utf-8")
    options = CorpusOptions(line_breaks="wrapped")
    assert [p.text for p in read_paragraphs([tmp_path / "wrapped.txt"], options)] == ["".join(wrapped)]


def test_sentence_ends_of_other_scripts():
    assert split_sentences("我爱北京。天安门很大！你去过吗？") == ["我爱北京。", "天安门很大！", "你去过吗？"]
    assert split_sentences("यह एक वाक्य है। यह दूसरा है।") == ["यह एक वाक्य है।", "यह दूसरा है।"]
    assert split_sentences("هل أنت بخير؟ نعم أنا بخير.") == ["هل أنت بخير؟", "نعم أنا بخير."]


def test_prepare_warns_when_the_tokenizer_does_not_know_the_text(tmp_path):
    (tmp_path / "en.txt").write_text("\n".join(s for d in make_documents(n_docs=5) for s in d) + "\n")
    bertforge_ok("tokenizer", "train", tmp_path / "en.txt", "--out", tmp_path / "tok", "--vocab-size", "120",
                 "--min-frequency", "1")  # fmt: skip
    write_lines(tmp_path / "vi.txt", [VIETNAMESE])
    done = bertforge("prepare", tmp_path / "vi.txt", "--tokenizer", tmp_path / "tok", "--out", tmp_path / "data")
    assert done.returncode == 0 and "of the tokens are [UNK]" in done.stderr and "tokenizer train" in done.stderr
