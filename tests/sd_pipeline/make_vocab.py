#!/usr/bin/env python3
"""Writes a small CLIP-format tokenizer folder (vocab.json, merges.txt, special_tokens_map.json), deterministically.

Usage: make_vocab.py OUTDIR [--merges N]      (N defaults to 1500; the vocab holds 512 + N + 2 tokens)

It trains byte-level BPE the way CLIP's vocab was made: the corpus is cleaned and split with CLIP's rules
(clip_tokenizer_ref.pre_tokenize), each piece becomes CLIP's printable byte symbols with '</w>' on the last one,
and the most frequent adjacent pair is merged, N times (ties: the smaller pair; a pair whose merged text is already
a symbol is skipped, so that every merge adds one new vocab entry). The vocab is in CLIP's order: the 256 byte
symbols, the same with '</w>', one entry per merge, then <|startoftext|> and <|endoftext|>.
The corpus below is our own text: prompt-like English, accented Latin, Greek, Cyrillic, CJK, emoji, digits and
punctuation.
"""
import argparse
import collections
import heapq
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clip_tokenizer_ref import BYTE_CHARS, pre_tokenize  # noqa: E402

CORPUS = """
a photo of an astronaut riding a horse on the moon, highly detailed, digital art, trending on artstation
a beautiful landscape painting of a mountain lake at sunrise, oil on canvas, warm light, soft colors
portrait of an old fisherman with a grey beard, dramatic lighting, sharp focus, 85mm lens, bokeh
a cute cat sitting on a wooden table next to a cup of coffee, morning light through the window
a futuristic city at night with neon lights and flying cars, cyberpunk style, rain, reflections
a red fox in a snowy forest, wildlife photography, national geographic, award winning photo
an oil painting of a ship in a storm, huge waves, dark clouds, lightning, in the style of the old masters
a bowl of fresh fruit on a kitchen counter: apples, oranges, bananas, grapes and a lemon
a small cottage in the countryside with a garden full of flowers, roses, tulips and sunflowers
a dragon flying over a medieval castle, fantasy art, epic composition, concept art, matte painting
a watercolor illustration of a little girl reading a book under a tree, children's book illustration
a close-up of a dew drop on a green leaf, macro photography, shallow depth of field
an astronaut floating in space above the earth, stars in the background, realistic, cinematic
a robot playing chess with a man in a park, autumn leaves, golden hour, film grain
a steaming bowl of ramen with an egg, noodles and green onions, food photography, studio lighting
the interior of a cozy library with tall bookshelves, a fireplace and a leather armchair
a lighthouse on a rocky cliff during a sunset, waves crashing, long exposure, vivid colors
an abstract painting with bold shapes and bright colors, geometric, modern art, minimalism
a pencil sketch of a horse running through a field, black and white, detailed drawing
a vintage car parked on a street in paris, 1960s, retro photograph, kodachrome
a bird's eye view of a river winding through a green valley, aerial photography, drone shot
a knight in shining armor holding a sword, standing in front of a burning village, dark fantasy
a pair of running shoes on a white background, product photo, high resolution, 8k
a desert with sand dunes under a starry sky, the milky way, night photography, wide angle
an owl sitting on a branch in the moonlight, ultra detailed feathers, octane render, unreal engine
a busy market street in a small town with people, stalls, lanterns and colorful umbrellas
a snowman with a carrot nose and a red scarf in a winter garden, children playing in the snow
a teddy bear wearing sunglasses on a beach, summer vibes, palm trees, blue sky, ocean waves
a bouquet of wild flowers in a glass vase on a windowsill, soft morning light, still life
a portrait of a woman with long curly hair, freckles, green eyes, natural light, photorealistic
an ancient temple in the jungle covered with vines and moss, mysterious atmosphere, fog, rays of light
the skyline of new york at dusk, skyscrapers, the empire state building, long exposure photograph
a tiger walking through tall grass, intense eyes, orange and black stripes, national park
a wooden boat on a calm lake with mountains in the background, reflection, serene, peaceful
a plate of pancakes with maple syrup, blueberries and butter, breakfast, overhead shot
a steampunk airship with brass gears and propellers flying above the clouds, victorian era
a fantasy map of an island kingdom with forests, rivers, villages and a volcano, parchment paper
a colorful parrot perched on a branch in the rainforest, tropical plants, vibrant, sharp details
a cup of hot chocolate with marshmallows next to a window with snow falling outside, hygge
a samurai standing on a bridge in the rain, cherry blossoms, ukiyo-e woodblock print style
an elephant family walking across the savanna at golden hour, dust, warm tones, africa
a glass jar filled with fireflies on a table at night, magical glow, fairy tale, whimsical
a spaceship landing on an alien planet with two moons, science fiction, purple sky, rocks
a jazz musician playing the saxophone in a smoky bar, moody lighting, blue tones, 1950s
a loaf of bread and a knife on a cutting board, rustic kitchen, flour, natural daylight
a mountain climber on a snowy peak, clear blue sky, adventure, wide shot, dramatic scale
a hummingbird drinking from a red flower, frozen motion, high speed photography, macro
a quiet street in tokyo at night, vending machines, wet asphalt, neon signs, anime style
a medieval village with stone houses and a church tower, spring, green hills, sheep grazing
a portrait of a smiling grandmother knitting a sweater, warm colors, cozy living room
a highly detailed render of a mechanical watch movement, gears, jewels, metal, studio shot
a polar bear on an ice floe in the arctic ocean, cold blue light, climate, wildlife
a hot air balloon festival over green fields at dawn, many balloons, soft haze, pastel colors
a surreal painting of melting clocks in a desert landscape, dreamlike, in the style of surrealism
a bicycle leaning against a brick wall covered with ivy, sunny afternoon, street photography
a waterfall in a lush green canyon, mist, rainbow, long exposure, nature photography
a group of friends having a picnic in a park, laughing, summer, film photo, candid
a majestic lion with a golden mane resting on a rock, sunset, savanna, telephoto lens
a chef cooking in a busy restaurant kitchen, flames, motion blur, documentary photography
a cathedral with stained glass windows, colorful light on the stone floor, gothic architecture
a field of lavender in provence with a farmhouse, purple rows, summer afternoon, france
an underwater scene with a coral reef, tropical fish, sea turtle, sunlight from above
a neon sign that says open in a dark alley, rainy night, cinematic, blade runner mood
a little wooden house on stilts over a lake, misty morning, fishing nets, quiet, calm
a pirate ship sailing on a sea of clouds, fantasy illustration, golden light, adventure
an old typewriter on a desk with a stack of papers and a cup of tea, writer's room
a herd of wild horses running on a beach, splashing water, sunset, freedom, dynamic
a snowy mountain village at christmas, lights in the windows, smoke from chimneys
masterpiece, best quality, ultra high res, realistic, sharp, intricate details, 4k, 8k, hdr
low quality, blurry, bad anatomy, extra fingers, deformed, watermark, text, signature, jpeg artifacts
photo, photograph, photography, photographic, painting, painted, painter, drawing, drawn, illustration
beautiful, beauty, detailed, detail, details, lighting, light, lights, lit, bright, brighter, brightest
don't, can't, won't, isn't, it's, i'm, you're, we've, they'll, she'd, let's, that's, what's, there's
i'll be there at 10:30, it's 2024, the year 1999, 3.14159, 42 apples, 100% cotton, $25, #1, no. 7
hello world! what is this? wow!!! really?! ... -- (yes) [no] {maybe} <tag> "quoted" 'single' @user
c'est la vie, à bientôt, déjà vu, crème brûlée, café au lait, naïve, garçon, façade, élève, noël
über, schön, grüße, straße, mädchen, fräulein, könig, größe, weiß, märchen, brötchen, fußball
mañana, niño, señor, corazón, canción, pequeño, año nuevo, jalapeño, el niño y la niña, ¿qué? ¡olé!
são paulo, coração, ação, não, pão, irmã, informação, canção do mar, obrigado, açúcar
zażółć gęślą jaźń, łódź, kraków, źródło, świat, dziękuję, czółno, wrocław, gdańsk
ıstanbul, şehir, çiçek, güneş, ağaç, öğretmen, kedi, köpek, türkiye, teşekkürler
phở bò, việt nam, hà nội, cảm ơn, bánh mì, xin chào, đẹp quá, tiếng việt
η ακρόπολη της αθήνας, ο ήλιος, η θάλασσα, καλημέρα, ευχαριστώ, φως, ουρανός, ελλάδα
αλφα βητα γαμμα δελτα, ΟΔΥΣΣΕΥΣ, ΣΩΚΡΑΤΗΣ, λόγος, ψυχή, ἀρετή, σοφία, φιλοσοφία
москва, санкт-петербург, кошка, собака, привет, спасибо, красивый закат над рекой
мир, дом, лес, небо, солнце, зима, лето, весна, осень, снег, дождь, звезда, луна
київ, україна, дякую, сонце, море, вишня, калина, ґанок, їжак, є, ї, і
東京の夜景, 富士山と桜, 猫と犬, 美しい風景, 日本の庭園, ありがとう, こんにちは
北京的长城, 中国山水画, 熊猫吃竹子, 美丽的花园, 你好世界, 谢谢, 春天的樱花
서울의 밤, 한국어, 안녕하세요, 감사합니다, 김치, 아름다운 하늘
a heart ❤️ and a star ⭐ and fire 🔥 and a smile 😀 and a cat 🐱 and a rocket 🚀 and a rainbow 🌈
thumbs up 👍, party 🎉, sun ☀️, moon 🌙, flower 🌸, tree 🌳, pizza 🍕, coffee ☕, music 🎵
0123456789 ١٢٣ ४५६ ½ ¾ ² ³ ⅓ Ⅻ ⑤ 10,000 1.5x 2:3 16:9 f/1.8 iso 100 1/250s
arrows → ← ↑ ↓, math ± × ÷ ≈ ≠ ≤ ≥ ∞ √ π, currency € £ ¥ ₹ ₽, marks © ® ™ § ¶ † • … — – «» „“ ‘’
"""


def train(words, n_merges):
    """words: {tuple of symbols: count}. Returns the merges, most frequent pair first."""
    seqs = [list(w) for w in words]
    counts = [words[w] for w in words]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)  # pair -> indices of the words that hold it
    for k, s in enumerate(seqs):
        for p in zip(s, s[1:]):
            pair_count[p] += counts[k]
            where[p].add(k)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    symbols = {sym for s in seqs for sym in s} | set(BYTE_CHARS.values()) | {c + "</w>" for c in BYTE_CHARS.values()}
    merges = []
    while heap and len(merges) < n_merges:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg or -neg <= 0:
            continue  # stale entry
        merged = pair[0] + pair[1]
        if merged in symbols:
            continue  # would give a second vocab entry with the same text
        merges.append(pair)
        symbols.add(merged)
        changed = set()
        for k in sorted(where.pop(pair)):
            s = seqs[k]
            for p in zip(s, s[1:]):
                pair_count[p] -= counts[k]
                changed.add(p)
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == pair:
                    out.append(merged)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[k] = out
            for p in zip(out, out[1:]):
                pair_count[p] += counts[k]
                where[p].add(k)
                changed.add(p)
        for p in sorted(changed):
            if pair_count[p] > 0 and p != pair:
                heapq.heappush(heap, (-pair_count[p], p))
        pair_count.pop(pair, None)
    return merges


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--merges", type=int, default=1500)
    args = ap.parse_args()

    words = collections.Counter()
    for line in CORPUS.strip().split("\n"):
        for piece in pre_tokenize(line):
            if piece in ("<|startoftext|>", "<|endoftext|>"):
                continue
            syms = [BYTE_CHARS[b] for b in piece.encode("utf-8")]
            syms[-1] += "</w>"
            words[tuple(syms)] += 1
    merges = train(dict(sorted(words.items())), args.merges)

    base = list(BYTE_CHARS.values())
    vocab = base + [c + "</w>" for c in base] + [a + b for a, b in merges] + ["<|startoftext|>", "<|endoftext|>"]
    assert len(set(vocab)) == len(vocab)
    os.makedirs(args.outdir, exist_ok=True)
    with open(os.path.join(args.outdir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(vocab)}, f, ensure_ascii=False)
    with open(os.path.join(args.outdir, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("#version: 0.2\n")
        f.writelines("%s %s\n" % m for m in merges)
    special = {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
               "pad_token": "<|endoftext|>"}
    with open(os.path.join(args.outdir, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump({k: {"content": v, "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}
                   for k, v in special.items()}, f, indent=2)
    print("make_vocab: %d merges, vocab size %d -> %s" % (len(merges), len(vocab), args.outdir))
    if len(merges) < args.merges:
        print("make_vocab: the corpus supports only %d merges" % len(merges))


if __name__ == "__main__":
    main()
