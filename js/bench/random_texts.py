"""Seeded random strings that mix scripts, digits, punctuation, ligatures, combining marks, zero-width characters
and emoji, one per line: extra conformance texts that hunt for tokenisation disagreements (reports/edge-js.md).

    python js/bench/random_texts.py 3000 > random.txt
    swembed conformance TABLE --out random.json --texts random.txt
"""
import random
import sys

POOLS = ["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", "éèêëàâäôöüûçñÅÉİıßẞ",
         "αβγδεζηθΣσςΩ", "абвгдежзийклмнопрстуфх", "中文日本語漢字한국어テキストのひらがな", "  ,.;:!?-_'\"()/\\@#",
         "ﬁﬂ²³½①ｆｕｌｌ", "\u0301\u0308\u200b\u00ad\t", "🍕❤™"]


def random_texts(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(rng.choice(POOLS)) for _ in range(rng.randint(0, 60))) for _ in range(n)]


if __name__ == "__main__":
    sys.stdout.write("".join(text + "\n" for text in random_texts(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)))
