//! Words: the one tokenizer the index and the query share.
//!
//! A word is a maximal run of alphanumeric characters (`_`, `:`, `-` and the rest separate, so
//! `tokio::select!` is `tokio` `select`). Each character is lowercased and a Latin letter with a
//! diacritic becomes its base letter (`Été` is `ete`; `ß` is `ss`); a combining diacritic inside a
//! word (decomposed text, as macOS writes it: `E` + U+0301) belongs to the word and is dropped, so
//! both spellings are the same word. Words longer than [`MAX_WORD`] characters are cut there (a
//! base64 blob is not a word anyone types).
//!
//! Chinese, Japanese and Korean characters ([`unspaced`]) are a word each: those scripts do not
//! put spaces between words (Korean puts them between phrases, particles attached), so a run of
//! them as one word could only be found from its start. The query reads words that touch (no
//! character between them, as `勉強` or `tokio日本`) as a phrase ([`super::query`]), so a word
//! in the middle of a sentence is found, in that order, as Lucene's standard tokenizer does
//! with one token per ideograph. An emoji is a word by itself too ([`pictograph`]: `🚀` is
//! found, and `👍🏽` or a flag, two that touch, as a phrase).
//!
//! Thai, Lao, Khmer and Myanmar put no spaces between words either: their letters, vowel signs
//! and digits are a word each as well, and their tone marks and other signs that are not
//! letters belong to the character before them and are folded away, as diacritics are (`ไม่`
//! is `ไ` `ม`, and `ไม่รู้` is one phrase). Arabic's vowel marks and tatweel and Hebrew's points
//! are folded away too (`كِتَابٌ` is `كتاب`, as people type it). A half-width katakana is its
//! full-width one, and a kana's sound mark written apart from it (half width, or decomposed as
//! macOS writes it) is composed with it: `ｶﾞｲﾄﾞ` and `ガイド` are the same words. Hangul written
//! decomposed (as macOS writes file names, which tools print: `한` as `ᄒ` `ᅡ` `ᆫ`) is composed
//! into its syllables.

use super::accents::BASES;

/// The longest word kept, in characters.
pub const MAX_WORD: usize = 40;

/// One word of a text: its folded form and where it sits (byte offsets into the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// Lowercased, accents removed.
    pub term: String,
    /// Byte offset of its first character.
    pub start: usize,
    /// Byte offset just past its last character.
    pub end: usize,
}

/// Appends `c` folded (lowercase, no diacritic, `ß` as `ss`, `ς` as `σ`, a full-width Latin
/// letter or digit as its ASCII one: `ＴＯＫＩＯ１` is `tokio1`, as a Japanese keyboard types it; a
/// half-width katakana as its full-width one: `ｶﾀｶﾅ` is `カタカナ`) to `out`.
fn fold_into(c: char, out: &mut String) {
    let c = match c {
        '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0).unwrap_or(c),
        '\u{ff66}'..='\u{ff9d}' => wide_kana(c),
        _ => c,
    };
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    for l in c.to_lowercase() {
        match l {
            // German's sharp s is written `ss` where it is not at hand (Unicode's case folding).
            'ß' => out.push_str("ss"),
            // Greek's final sigma is the sigma `Σ` lowercases to (`ΟΔΟΣ` is `οδος`).
            'ς' => out.push('σ'),
            // Turkish's `İ` lowercases to `i` and a combining dot: the `i` alone, as `I`'s.
            '\u{307}' if c == 'İ' => {}
            l => match BASES.binary_search_by_key(&l, |&(k, _)| k) {
                Ok(i) => out.push(char::from(BASES[i].1)),
                Err(_) => out.push(l),
            },
        }
    }
}

/// `text` with each character folded as a word's are (lowercase, no diacritic) and combining
/// marks dropped, nothing split into words: the spellings of a name that a file system may take
/// for one file (`Café`, `CAFE\u{301}`) fold the same. Coarser than any file system (`cafe`
/// too), which is what a key for one lock per file wants: two files sharing a lock only wait
/// for each other.
pub fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars().filter(|c| !combining(*c)) {
        fold_into(c, &mut out);
    }
    out
}

/// The full-width katakana of a half-width one (U+FF66 `ｦ` to U+FF9D `ﾝ`, in the order of
/// Unicode's `<narrow>` decompositions).
fn wide_kana(c: char) -> char {
    const WIDE: &str = "ヲァィゥェォャュョッーアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワン";
    WIDE.chars().nth((c as u32 - 0xff66) as usize).unwrap_or(c)
}

/// Kana `k` (as [`fold_into`] folds it) with the sound mark `m` after it, as one character:
/// `カ` and `゙` (U+3099, or the half-width `ﾞ`) are `ガ`, `ハ` and `゚` are `パ`. So a kana
/// written decomposed or in half width is the word its composed form is. `None` when they do
/// not compose.
fn voiced(k: char, m: char) -> Option<char> {
    let step = match m {
        '\u{3099}' | '\u{ff9e}' => 1,
        '\u{309a}' | '\u{ff9f}' => 2,
        _ => return None,
    };
    let k = k as u32;
    let v = match (step, k) {
        // か to ち and カ to チ (every other one), つ て と and ツ テ ト.
        (1, 0x304b..=0x3061) if (k - 0x304b) % 2 == 0 => k + 1,
        (1, 0x30ab..=0x30c1) if (k - 0x30ab) % 2 == 0 => k + 1,
        (1, 0x3064 | 0x3066 | 0x3068 | 0x30c4 | 0x30c6 | 0x30c8) => k + 1,
        // は to ほ and ハ to ホ (every third one): ば, ぱ.
        (_, 0x306f..=0x307b) if (k - 0x306f) % 3 == 0 => k + step,
        (_, 0x30cf..=0x30db) if (k - 0x30cf) % 3 == 0 => k + step,
        (1, 0x3046) => 0x3094,         // う ゔ
        (1, 0x30a6) => 0x30f4,         // ウ ヴ
        (1, 0x30ef..=0x30f2) => k + 8, // ワ ヷ to ヲ ヺ
        (1, 0x309d | 0x30fd) => k + 1, // ゝ ゞ, ヽ ヾ
        _ => return None,
    };
    char::from_u32(v)
}

/// The Hangul syllable that `c` and the characters `after` it compose, as Unicode's canonical
/// composition does (decomposed text, as macOS writes file names: `ᄒ` `ᅡ` `ᆫ` is `한`): a
/// leading consonant and a vowel are a syllable, and a syllable without a final consonant
/// takes a trailing one. `None` when they do not compose.
fn hangul(c: char, mut after: impl Iterator<Item = char>) -> Option<char> {
    const SYLLABLES: u32 = 0xac00;
    // Jamo `c`'s index among `count` from `first` (vowels U+1161, trailing U+11A8).
    let jamo = |c: Option<char>, first: u32, count: u32| {
        c.map(|c| (c as u32).wrapping_sub(first))
            .filter(|&i| i < count)
    };
    let c = c as u32;
    let lead = c.wrapping_sub(0x1100);
    let (syllable, next) = if lead < 19 {
        let vowel = jamo(after.next(), 0x1161, 21)?;
        (SYLLABLES + (lead * 21 + vowel) * 28, after.next())
    } else if (SYLLABLES..=0xd7a3).contains(&c) && (c - SYLLABLES) % 28 == 0 {
        (c, after.next())
    } else {
        return None;
    };
    match jamo(next, 0x11a8, 27) {
        Some(t) => char::from_u32(syllable + 1 + t),
        None => (syllable != c).then(|| char::from_u32(syllable)).flatten(),
    }
}

/// Appends `c`, a character that is a word by itself, folded; composed with the characters
/// `after` it when they compose with it ([`hangul`], or a kana's sound mark: [`voiced`]). What
/// it took of them is [`combining`], and belongs to the word.
fn fold_alone(c: char, mut after: impl Iterator<Item = char> + Clone, out: &mut String) {
    if let Some(syllable) = hangul(c, after.clone()) {
        out.push(syllable);
        return;
    }
    let at = out.len();
    fold_into(c, out);
    if let Some(v) = after
        .next()
        .and_then(|m| voiced(out[at..].chars().next()?, m))
    {
        out.truncate(at);
        out.push(v);
    }
}

/// A mark that is part of the word it follows and is folded away: a combining diacritical mark
/// (U+0300 to U+036F); kana's sound marks where they do not compose with the character before
/// ([`voiced`]); Hangul's vowels and trailing consonants written as conjoining jamo ([`hangul`]
/// composes them with the consonant or syllable before them); Arabic's vowel marks (harakat), Quranic marks and the tatweel that
/// stretches a word (`كِتَابٌ` and `كـتاب` are `كتاب`); Hebrew's points (niqqud and cantillation:
/// `שָׁלוֹם` is `שלום`); or a sign of Thai, Lao, Khmer or Myanmar that is not a letter (tone
/// marks, the silencers, Khmer's subscript sign, Myanmar's virama and tones).
pub(super) fn combining(c: char) -> bool {
    // The first test alone answers for ASCII and Latin-1.
    c >= '\u{300}'
        && (matches!(c,
            '\u{300}'..='\u{36f}'
            | '\u{591}'..='\u{5bd}'     // Hebrew points
            | '\u{5bf}'
            | '\u{5c1}'..='\u{5c2}'
            | '\u{5c4}'..='\u{5c5}'
            | '\u{5c7}'
            | '\u{610}'..='\u{61a}'     // Arabic marks
            | '\u{640}'                 // tatweel
            | '\u{64b}'..='\u{65f}'     // harakat
            | '\u{670}'
            | '\u{6d6}'..='\u{6dc}'
            | '\u{6df}'..='\u{6e4}'
            | '\u{6e7}'..='\u{6e8}'
            | '\u{6ea}'..='\u{6ed}'
            | '\u{1161}'..='\u{1175}'   // Hangul's conjoining vowels
            | '\u{11a8}'..='\u{11c2}'   // and trailing consonants
            | '\u{3099}'..='\u{309a}'   // kana's sound marks
            | '\u{ff9e}'..='\u{ff9f}'
        ) || (matches!(c,
            '\u{e47}'..='\u{e4e}'       // Thai
            | '\u{ec8}'..='\u{ece}'     // Lao
            | '\u{1037}'..='\u{103a}'   // Myanmar
            | '\u{1087}'..='\u{108d}'
            | '\u{108f}'
            | '\u{109a}'..='\u{109b}'
            | '\u{17c6}'..='\u{17d3}'   // Khmer
            | '\u{17dd}'
        ) && !c.is_alphanumeric())) // (their vowel signs are letters: words)
}

/// A character of a script written without spaces between its words, a word by itself: Han
/// ideographs (with the iteration marks `々` and `〆` and the ideographic zero), kana (full
/// and half width), Hangul (syllables and jamo), and the letters, vowel signs and digits of
/// Thai, Lao, Myanmar and Khmer.
pub fn unspaced(c: char) -> bool {
    // The first test alone answers for Latin text, most of what is indexed.
    c >= '\u{e00}'
        && matches!(c,
        '\u{e00}'..='\u{eff}'           // Thai, Lao
        | '\u{1000}'..='\u{109f}'       // Myanmar
        | '\u{1100}'..='\u{11ff}'       // Hangul jamo
        | '\u{1780}'..='\u{17ff}'       // Khmer
        | '\u{3005}'..='\u{3007}'       // 々 〆 〇
        | '\u{3041}'..='\u{30ff}'       // hiragana, katakana
        | '\u{3105}'..='\u{312f}'       // bopomofo
        | '\u{3131}'..='\u{318e}'       // Hangul compatibility jamo
        | '\u{31f0}'..='\u{31ff}'       // katakana phonetic extensions
        | '\u{3400}'..='\u{4dbf}'       // CJK extension A
        | '\u{4e00}'..='\u{9fff}'       // CJK unified ideographs
        | '\u{a960}'..='\u{a97f}'       // Hangul jamo extended A
        | '\u{ac00}'..='\u{d7ff}'       // Hangul syllables, jamo extended B
        | '\u{f900}'..='\u{faff}'       // CJK compatibility ideographs
        | '\u{ff66}'..='\u{ffdc}'       // half-width katakana and Hangul
        | '\u{20000}'..='\u{3134f}'     // CJK extensions B to G
        )
        && c.is_alphanumeric()
}

/// An emoji or another pictograph (a symbol people search chats for: `🚀`, `✅`, `⭐`), a word
/// by itself: the blocks of emoji and pictographs, dingbats, miscellaneous symbols and
/// technical ones, and regional indicators (two make a flag). Skin tones and the pieces of
/// sequences (joiners, variation selectors) are not: they separate, so `👍` finds `👍🏽`.
pub fn pictograph(c: char) -> bool {
    matches!(c,
        '\u{2300}'..='\u{23ff}'         // technical: ⌚ ⏰ ⏳
        | '\u{2600}'..='\u{27bf}'       // miscellaneous symbols, dingbats: ☀ ✅ ✓ ❤
        | '\u{2b00}'..='\u{2bff}'       // arrows and symbols: ⭐ ⬆
        | '\u{1f000}'..='\u{1f3fa}'     // tiles, cards, enclosed letters, flags' indicators, 🌅
        | '\u{1f400}'..='\u{1faff}'     // animals to symbols and pictographs extended
    )
}

/// A character that is a word by itself ([`unspaced`], [`pictograph`]).
fn alone(c: char) -> bool {
    unspaced(c) || pictograph(c)
}

/// The words of `text`, in order.
pub fn words(text: &str) -> Vec<Word> {
    let mut out: Vec<Word> = Vec::new();
    let mut current: Option<(usize, usize, String, usize)> = None; // start, end, term, chars
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if combining(c) {
            // Part of the word right before it (a run, or a character alone).
            if let Some((_, end, _, _)) = current.as_mut() {
                *end = i + c.len_utf8();
                continue;
            }
            if let Some(word) = out.last_mut().filter(|w| w.end == i) {
                word.end = i + c.len_utf8();
                continue;
            }
        }
        if alone(c) {
            out.extend(
                current
                    .take()
                    .map(|(start, end, term, _)| Word { term, start, end }),
            );
            let mut term = String::new();
            fold_alone(c, chars.clone().map(|(_, m)| m), &mut term);
            out.push(Word {
                term,
                start: i,
                end: i + c.len_utf8(),
            });
        } else if c.is_alphanumeric() {
            let (_, end, term, n) = current.get_or_insert_with(|| (i, i, String::new(), 0));
            if *n < MAX_WORD {
                fold_into(c, term);
                *n += 1;
            }
            *end = i + c.len_utf8();
        } else if let Some((start, end, term, _)) = current.take() {
            out.push(Word { term, start, end });
        }
    }
    if let Some((start, end, term, _)) = current {
        out.push(Word { term, start, end });
    }
    out
}

/// Calls `f` with each folded term of `text`, in order, without allocating one string per
/// word (what the in-memory index is built with; the same words as [`words`]).
pub fn for_each_term(text: &str, mut f: impl FnMut(&str)) {
    let mut term = String::new();
    let mut n = 0;
    // The character before was part of a word (a run's, one alone, or a mark on either): a
    // mark now belongs to it, as in `words`.
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if combining(c) && in_word {
            continue;
        }
        in_word = true;
        if alone(c) {
            if n > 0 {
                f(&term);
                term.clear();
                n = 0;
            }
            fold_alone(c, chars.clone(), &mut term);
            f(&term);
            term.clear();
        } else if c.is_alphanumeric() {
            if n < MAX_WORD {
                fold_into(c, &mut term);
                n += 1;
            }
        } else {
            in_word = false;
            if n > 0 {
                f(&term);
                term.clear();
                n = 0;
            }
        }
    }
    if n > 0 {
        f(&term);
    }
}

/// Term `term`'s bit in a follower signature (each posting's byte of the words that follow
/// its term in the document): one of 8, from a 32-bit FNV-1a of its bytes. Fixed: built
/// segments keep signatures.
pub fn follower_bit(term: &str) -> u8 {
    let hash = term.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    1 << (hash >> 29)
}

/// The folded terms of `text`, in order.
pub fn terms(text: &str) -> Vec<String> {
    words(text).into_iter().map(|w| w.term).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`for_each_term`] gives the same words as [`terms`].
    fn assert_same_terms(text: &str) {
        let mut seen = Vec::new();
        for_each_term(text, |t| seen.push(t.to_string()));
        assert_eq!(seen, terms(text));
    }

    #[test]
    fn words_fold_case_and_accents_and_keep_offsets() {
        // The sharp s is `ss` (capital too), as it is written where it is not at hand.
        assert_eq!(
            terms("Straße STRASSE STRAẞE"),
            ["strasse", "strasse", "strasse"]
        );
        // Greek's final sigma is a sigma, whatever the case; a Turkish `İ` is an `i`.
        assert_eq!(
            terms("ΟΔΟΣ οδος Οδος İSTANBUL istanbul"),
            ["οδοσ", "οδοσ", "οδοσ", "istanbul", "istanbul"]
        );
        assert_same_terms("ΟΔΟΣ İSTANBUL");
        let text = "Déjà vu: tokio::select! ÉTÉ naïve_Œuvre 42";
        assert_eq!(
            terms(text),
            ["deja", "vu", "tokio", "select", "ete", "naive", "œuvre", "42"]
        );
        let w = &words(text)[0];
        assert_eq!(&text[w.start..w.end], "Déjà");
        // Decomposed (a base letter, then a combining accent): the same words.
        let decomposed = "De\u{301}ja\u{300} vu: E\u{301}TE\u{301}";
        assert_eq!(terms(decomposed), ["deja", "vu", "ete"]);
        let w = &words(decomposed)[2];
        assert_eq!(
            &decomposed[w.start..w.end],
            "E\u{301}TE\u{301}",
            "the marks are in it"
        );
        assert_same_terms(decomposed);
    }

    #[test]
    fn each_term_is_a_word() {
        let text = "Déjà vu: tokio::select! ÉTÉ naïve_Œuvre 42 ".repeat(2) + &"y".repeat(50);
        assert_same_terms(&text);
    }

    #[test]
    fn follower_bits_are_fixed() {
        // Kept in built segments: a change of the hash is a change of their format.
        let bits: Vec<u8> = ["", "a", "tokio", "select", "w300x"]
            .iter()
            .map(|t| follower_bit(t))
            .collect();
        assert_eq!(bits, [16, 128, 32, 1, 128]);
    }

    #[test]
    fn chinese_japanese_and_korean_characters_are_a_word_each() {
        let text = "日本語を勉強中 tokio日本 학교에서 ｶﾀｶﾅ、中文。 々";
        assert_eq!(
            terms(text),
            [
                "日", "本", "語", "を", "勉", "強", "中", "tokio", "日", "本", "학", "교", "에",
                "서", "カ", "タ", "カ", "ナ", "中", "文", "々"
            ]
        );
        let w = &words(text)[8];
        assert_eq!((&text[w.start..w.end], w.start), ("日", 27));
        assert_same_terms(text);
        // Their punctuation separates, as any other.
        assert!(!unspaced('、') && !unspaced('・') && unspaced('ー'));
        // Full-width Latin letters and digits are the ASCII ones.
        assert_eq!(terms("ＴＯＫＩＯ１の本"), ["tokio1", "の", "本"]);
    }

    #[test]
    fn kana_in_half_width_or_decomposed_is_the_composed_kana() {
        // Half width (as older Japanese systems write katakana), with its sound marks; the
        // combining sound marks (as macOS writes kana decomposed); and composed.
        let text = "ｶﾞｲﾄﾞ ガイド ｶ\u{3099}イト\u{3099} ﾊﾟｰﾃｨｰ は\u{309a} ｳﾞ ヽ\u{3099}";
        assert_eq!(
            terms(text),
            [
                "ガ", "イ", "ド", "ガ", "イ", "ド", "ガ", "イ", "ド", "パ", "ー", "テ", "ィ", "ー",
                "ぱ", "ヴ", "ヾ"
            ]
        );
        let words = words(text);
        assert_eq!(&text[words[0].start..words[0].end], "ｶﾞ");
        assert_eq!(&text[words[8].start..words[8].end], "ト\u{3099}");
        // Characters that touch, marks and all: a phrase.
        assert!(words[..3].windows(2).all(|w| w[0].end == w[1].start));
        assert_same_terms(text);
        // A mark that does not compose (after ナ, a Latin word, or nothing) is folded away;
        // a half-width mark with nothing before it is a character of its own.
        assert_eq!(terms("ナﾞ aﾟ \u{3099} ﾞ"), ["ナ", "a", "ﾞ"]);
        assert_same_terms("ナﾞ aﾟ \u{3099} ﾞ");
        // Every half-width katakana has its full-width one, and every kana that takes a sound
        // mark composes with it.
        let marked =
            |kana: &str, mark: char| -> String { kana.chars().flat_map(|c| [c, mark]).collect() };
        let cases = [
            (
                ('\u{ff66}'..='\u{ff9d}').collect(),
                "ヲァィゥェォャュョッーアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワン",
            ),
            (
                marked("ｶｷｸｹｺｻｼｽｾｿﾀﾁﾂﾃﾄﾊﾋﾌﾍﾎｳﾜｦ", 'ﾞ'),
                "ガギグゲゴザジズゼゾダヂヅデドバビブベボヴヷヺ",
            ),
            (
                marked("かきくけこさしすせそたちつてとはひふへほう", '\u{3099}'),
                "がぎぐげござじずぜぞだぢづでどばびぶべぼゔ",
            ),
            (marked("ﾊﾋﾌﾍﾎはほ", 'ﾟ'), "パピプペポぱぽ"),
        ];
        for (text, folded) in cases {
            assert_eq!(terms(&text).concat(), folded, "{text}");
        }
    }

    /// Hangul written decomposed (conjoining jamo, as macOS writes file names and tools print
    /// them) is the composed syllables, checked against Unicode's own decomposition.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn hangul_decomposed_is_the_composed_syllables() {
        use unicode_normalization::UnicodeNormalization;
        let composed = "한국어 파일.txt 학교에서";
        let text: String = composed.nfd().collect();
        assert_eq!(text.chars().count(), 28, "decomposed: {text:?}");
        assert_eq!(terms(&text), terms(composed));
        assert_eq!(
            terms(&text),
            ["한", "국", "어", "파", "일", "txt", "학", "교", "에", "서"]
        );
        let words = words(&text);
        assert_eq!(
            &text[words[0].start..words[0].end],
            "\u{1112}\u{1161}\u{11ab}"
        );
        // Syllables that touch, jamo and all: a phrase.
        assert!(words[..3].windows(2).all(|w| w[0].end == w[1].start));
        assert_same_terms(&text);
        // A syllable without a final consonant takes a trailing one; jamo that do not compose
        // (a vowel alone, a leading consonant before another) are characters of their own, and
        // a vowel or a trailing consonant after anything else belongs to it.
        assert_eq!(terms("하\u{11ab}"), ["한"]);
        assert_eq!(
            terms("\u{1161} \u{1112}\u{1100}"),
            ["\u{1161}", "\u{1112}", "\u{1100}"]
        );
        assert_eq!(terms("a\u{1161} 日\u{11ab}"), ["a", "日"]);
        assert_same_terms("\u{1161} \u{1112}\u{1100} a\u{1161} 日\u{11ab} 하\u{11ab}");
        // Every syllable, decomposed, is itself.
        for c in '\u{ac00}'..='\u{d7a3}' {
            let decomposed: String = c.to_string().nfd().collect();
            assert_eq!(terms(&decomposed), [c.to_string()], "{c}");
        }
    }

    #[test]
    fn thai_lao_khmer_and_myanmar_characters_are_a_word_each() {
        // Tone marks and other signs that are not letters belong to the character before.
        let text = "ฉันไม่รู้ ๑๒ ເກົ້າ ខ្មែរ မြန်မာ";
        assert_eq!(
            terms(text),
            [
                "ฉ", "\u{e31}", "น", "ไ", "ม", "ร", "\u{e39}", "๑", "๒", "ເ", "ກ", "\u{ebb}", "າ",
                "ខ", "ម", "ែ", "រ", "မ", "ြ", "န", "မ", "ာ"
            ]
        );
        let words = words(text);
        let spans: Vec<&str> = words.iter().map(|w| &text[w.start..w.end]).collect();
        assert_eq!(spans[4], "ม\u{e48}");
        assert_eq!(spans[6], "\u{e39}\u{e49}");
        assert_eq!(spans[13], "ខ\u{17d2}");
        assert_eq!(spans[19], "န\u{103a}");
        // So the characters of a word touch, tone marks and all (what makes them a phrase).
        assert!(words[..7].windows(2).all(|w| w[0].end == w[1].start));
        assert_same_terms(text);
        // A mark with no character before it is nothing; their punctuation separates.
        assert!(terms("\u{e48} ๏ ฯ").iter().eq(["ฯ"].iter()));
    }

    #[test]
    fn arabic_and_hebrew_marks_are_folded_away() {
        // Harakat, tatweel, niqqud: the word without them.
        assert_eq!(
            terms("كِتَابٌ كـتاب كتاب שָׁלוֹם שלום"),
            ["كتاب", "كتاب", "كتاب", "שלום", "שלום"]
        );
        let text = "قَرَأْتُ";
        let w = &words(text)[0];
        assert_eq!((w.term.as_str(), w.end), ("قرأت", text.len()));
        assert_same_terms(text);
    }

    #[cfg(not(target_arch = "wasm32"))]
    proptest::proptest! {
        /// Over text mixing every kind of character the tokenizer tells apart (runs, characters
        /// alone, marks after either or after nothing, separators), `for_each_term` gives the
        /// words `words` gives.
        #[test]
        fn each_term_is_a_word_whatever_the_text(chars in proptest::collection::vec(
            proptest::sample::select(vec![
                'a', 'É', '1', ' ', '-', '日', '本', 'ไ', 'ม', '\u{e48}', '\u{e31}', '\u{301}',
                '\u{345}', 'ك', '\u{64e}', '\u{640}', 'ש', '\u{5b8}', '🚀', '\u{17d2}', 'カ',
                'ﾊ', 'ﾞ', 'ﾟ', '\u{3099}', 'ﾝ', '\u{1112}', '\u{1161}', '\u{11ab}', '하',
            ]),
            0..24,
        )) {
            let text: String = chars.into_iter().collect();
            let mut seen = Vec::new();
            for_each_term(&text, |t| seen.push(t.to_string()));
            proptest::prop_assert_eq!(seen, terms(&text), "{:?}", text);
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    proptest::proptest! {
        /// A text and its canonical decomposition (Unicode's, as macOS writes text: a letter
        /// and its accent, a kana and its sound mark, a Hangul syllable's jamo) are the same
        /// words.
        #[test]
        fn a_decomposed_text_is_the_same_words(chars in proptest::collection::vec(
            proptest::sample::select(vec![
                'a', 'É', 'ệ', 'ñ', 'Å', 'ǖ', 'ḉ', ' ', '.', '日', 'ガ', 'パ', 'ヴ', 'ぽ', 'ゞ',
                '한', '가', '갃', '뷁', 'ト',
            ]),
            0..24,
        )) {
            use unicode_normalization::UnicodeNormalization;
            let text: String = chars.into_iter().collect();
            let decomposed: String = text.nfd().collect();
            proptest::prop_assert_eq!(terms(&decomposed), terms(&text), "{:?}", decomposed);
        }
    }

    #[test]
    fn an_emoji_is_a_word() {
        // A skin tone and a joiner separate; a flag is its two regional indicators.
        let text = "ship it🚀🚀 👍🏽 👩‍💻 🇯🇵 done ✓ ⭐";
        assert_eq!(
            terms(text),
            [
                "ship", "it", "🚀", "🚀", "👍", "👩", "💻", "🇯", "🇵", "done", "✓", "⭐"
            ]
        );
        assert_same_terms(text);
        assert!(!pictograph('🏽') && !pictograph('\u{200d}') && !pictograph('\u{fe0f}'));
    }

    #[test]
    fn long_words_are_cut() {
        let long = "x".repeat(100);
        assert_eq!(terms(&long)[0].len(), MAX_WORD);
        assert!(terms("  ,, ").is_empty());
    }
}
