//! Synthetic prompt text for the formats that need text: exactly the requested number of tokens, with the same text
//! wherever the dataset's prefix hashes say the prompts are the same.
//!
//! Every token is one word of [`WORDS`] with a space before it. Each of those is one token under OpenAI's
//! `cl100k_base` and `o200k_base` encodings (checked by this crate's tests with `tiktoken-rs`, which carries both
//! offline). Their pre-tokenizer splits text before every space-led run of letters, so no two words ever merge:
//! a text of `n` words is `n` tokens. Llama 3 builds on `cl100k_base` (its first 100 k tokens and its
//! pre-tokenizer), so the count holds there too; under other tokenizers common English words are still mostly one
//! token each, and the count is close rather than exact.
//!
//! Token `p` of a prompt is a word drawn from the dataset's hash of the block that holds it and from `p`'s offset in
//! that block. Two prompts that share `k` blocks (equal chained hashes `0..k`) therefore share their first
//! `k × block_size` tokens of text, and a target server's prefix cache sees the reuse the dataset recorded, at the
//! dataset's own block size. Blocks the dataset did not hash (a partial last block, or a prompt without hashes)
//! are drawn from the request's own seed, so they are never shared. Two different blocks start with the same word
//! one time in 384; a server's cache block (16 tokens or more) never matches by chance.

use std::ops::Range;

/// Words that are one token each, with a leading space, under `cl100k_base` and `o200k_base`.
pub const WORDS: [&str; 384] = [
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "president",
    "team",
    "minute",
    "idea",
    "body",
    "information",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "foot",
    "age",
    "policy",
    "music",
    "market",
    "sense",
    "nation",
    "plan",
    "college",
    "interest",
    "experience",
    "effect",
    "class",
    "control",
    "care",
    "field",
    "development",
    "role",
    "effort",
    "rate",
    "heart",
    "show",
    "leader",
    "light",
    "voice",
    "mind",
    "price",
    "report",
    "decision",
    "son",
    "view",
    "relationship",
    "town",
    "road",
    "arm",
    "difference",
    "value",
    "building",
    "action",
    "model",
    "season",
    "society",
    "tax",
    "director",
    "position",
    "player",
    "record",
    "paper",
    "space",
    "ground",
    "form",
    "event",
    "official",
    "matter",
    "center",
    "couple",
    "site",
    "project",
    "activity",
    "star",
    "table",
    "need",
    "court",
    "oil",
    "situation",
    "cost",
    "industry",
    "figure",
    "street",
    "image",
    "phone",
    "data",
    "picture",
    "practice",
    "piece",
    "land",
    "product",
    "doctor",
    "wall",
    "patient",
    "worker",
    "news",
    "test",
    "movie",
    "north",
    "love",
    "support",
    "technology",
    "step",
    "computer",
    "type",
    "attention",
    "film",
    "tree",
    "source",
    "organization",
    "hair",
    "window",
    "evidence",
    "population",
    "truth",
    "song",
    "wind",
    "river",
    "stone",
    "bridge",
    "garden",
    "forest",
    "island",
    "mountain",
    "ocean",
    "valley",
    "letter",
    "dinner",
    "summer",
    "winter",
    "spring",
    "autumn",
    "energy",
    "signal",
    "engine",
    "memory",
    "server",
    "request",
    "token",
    "cache",
    "block",
    "queue",
    "batch",
    "layer",
    "network",
    "cloud",
    "storage",
    "metric",
    "answer",
    "simple",
    "quiet",
    "bright",
    "early",
    "green",
    "blue",
    "red",
    "yellow",
    "black",
    "white",
    "small",
    "large",
    "short",
    "long",
    "young",
    "old",
    "high",
    "low",
    "open",
    "close",
    "begin",
    "start",
    "stop",
    "watch",
    "learn",
    "teach",
    "build",
    "break",
    "bring",
    "carry",
    "draw",
    "drive",
    "eat",
    "fall",
    "feel",
    "find",
    "give",
    "grow",
    "hold",
    "keep",
    "know",
    "leave",
    "listen",
    "live",
    "look",
    "make",
    "meet",
    "move",
    "pay",
    "play",
    "read",
    "run",
    "say",
    "see",
    "sell",
    "send",
    "sit",
    "speak",
    "spend",
    "stand",
    "take",
    "talk",
    "tell",
    "think",
    "turn",
    "walk",
    "want",
    "write",
    "little",
    "great",
    "good",
    "new",
    "first",
    "last",
    "other",
    "same",
    "different",
    "important",
    "public",
    "able",
    "free",
    "full",
    "hard",
    "real",
    "sure",
    "clear",
    "human",
    "local",
    "social",
    "major",
    "national",
    "personal",
    "political",
    "recent",
    "special",
    "whole",
    "strong",
    "possible",
    "certain",
    "natural",
    "physical",
    "common",
    "final",
    "main",
    "easy",
    "happy",
    "safe",
    "warm",
    "cold",
    "dark",
    "deep",
    "wide",
    "fast",
    "slow",
    "rich",
    "poor",
    "heavy",
    "dry",
    "wet",
    "clean",
    "fresh",
    "strange",
    "calm",
    "proud",
    "brave",
    "gentle",
    "wise",
    "harbor",
    "village",
    "castle",
    "kitchen",
    "chair",
    "pencil",
    "basket",
    "candle",
    "ladder",
    "rocket",
    "planet",
    "silver",
    "golden",
    "copper",
    "marble",
    "velvet",
    "cotton",
    "glass",
    "wooden",
    "iron",
    "steel",
    "salt",
    "sugar",
    "bread",
    "butter",
    "cheese",
];

/// Block size used to seed the text of a prompt without hashes (any value works: nothing is shared).
const UNHASHED_BLOCK: u32 = 64;

/// The blocks of one prompt, from which its text is drawn.
#[derive(Debug, Clone, Copy)]
pub struct PromptText<'a> {
    hashes: &'a [u64],
    block_size: u32,
    /// Seed of the blocks the dataset did not hash, unique to the request.
    own: u64,
}

impl<'a> PromptText<'a> {
    /// A prompt with the dataset's chained `hashes` of `block_size`-token blocks (empty or `None` when it has none),
    /// and `own`, a seed unique to the request, for the blocks without a hash.
    pub fn new(hashes: &'a [u64], block_size: Option<u32>, own: u64) -> Self {
        match block_size.filter(|&b| b > 0) {
            Some(block_size) => Self { hashes, block_size, own },
            None => Self { hashes: &[], block_size: UNHASHED_BLOCK, own },
        }
    }

    /// Token `position` of the prompt: one word, without its leading space.
    pub fn word(&self, position: u32) -> &'static str {
        let block = position / self.block_size;
        let offset = position % self.block_size;
        let seed = match self.hashes.get(block as usize) {
            Some(&hash) => mix(hash),
            None => mix(self.own ^ mix(u64::from(block))),
        };
        let index = mix(seed ^ u64::from(offset)) % WORDS.len() as u64;
        WORDS[index as usize]
    }

    /// The text of tokens `range`: one space-led word per token.
    pub fn text(&self, range: Range<u32>) -> String {
        let mut text = String::with_capacity(range.len() * 7);
        for position in range {
            text.push(' ');
            text.push_str(self.word(position));
        }
        text
    }
}

/// SplitMix64's finalizer: a bijection of `u64` that spreads every input bit over the output.
pub(crate) fn mix(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoders() -> [(&'static str, tiktoken_rs::CoreBPE); 2] {
        [("cl100k_base", tiktoken_rs::cl100k_base().unwrap()), ("o200k_base", tiktoken_rs::o200k_base().unwrap())]
    }

    #[test]
    fn every_word_is_one_token_and_none_repeats() {
        for (name, bpe) in encoders() {
            for word in WORDS {
                assert_eq!(bpe.encode_ordinary(&format!(" {word}")).len(), 1, "{word:?} under {name}");
            }
        }
        let mut sorted = WORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), WORDS.len());
    }

    /// Common prefix of two token lists.
    fn common(a: &[u32], b: &[u32]) -> usize {
        a.iter().zip(b).take_while(|(x, y)| x == y).count()
    }

    #[test]
    fn prompts_sharing_k_blocks_share_k_blocks_of_tokens_and_have_their_lengths() {
        // Chained hashes as a dataset has them: `a` and `b` share their first 3 blocks of 16 tokens, `c` shares 1
        // with both, `d` none; `b` has a partial last block that the dataset did not hash.
        let a = [11, 12, 13, 14, 15];
        let b = [11, 12, 13, 24];
        let c = [11, 32];
        let d = [41, 42, 43];
        let prompts = [(&a[..], 80, 1), (&b[..], 70, 2), (&c[..], 32, 3), (&d[..], 48, 4)];
        for (name, bpe) in encoders() {
            let tokens: Vec<Vec<u32>> = prompts
                .iter()
                .map(|&(hashes, length, own)| {
                    let text = PromptText::new(hashes, Some(16), own).text(0..length);
                    let tokens = bpe.encode_ordinary(&text);
                    assert_eq!(tokens.len(), length as usize, "length under {name}");
                    tokens
                })
                .collect();
            assert_eq!(common(&tokens[0], &tokens[1]), 3 * 16, "a and b under {name}");
            assert_eq!(common(&tokens[0], &tokens[2]), 16, "a and c under {name}");
            assert_eq!(common(&tokens[1], &tokens[2]), 16, "b and c under {name}");
            assert_eq!(common(&tokens[0], &tokens[3]), 0, "a and d under {name}");
        }
    }

    #[test]
    fn identical_prompts_are_identical_text_even_in_their_unhashed_tail_only_when_the_seed_is() {
        let hashes = [7, 8];
        let one = PromptText::new(&hashes, Some(16), 1).text(0..40);
        assert_eq!(one, PromptText::new(&hashes, Some(16), 1).text(0..40));
        let other = PromptText::new(&hashes, Some(16), 2).text(0..40);
        // The 32 hashed tokens are shared, the 8-token tail is the request's own.
        let words = |t: &str| t.split(' ').skip(1).map(str::to_owned).collect::<Vec<_>>();
        let (one, other) = (words(&one), words(&other));
        assert_eq!(one[..32], other[..32]);
        assert_ne!(one[32..], other[32..]);
    }

    #[test]
    fn a_range_is_the_same_words_as_the_whole_prompt_there() {
        let hashes = [5, 6, 7];
        let prompt = PromptText::new(&hashes, Some(4), 9);
        let whole = prompt.text(0..12);
        assert_eq!(format!("{}{}", prompt.text(0..5), prompt.text(5..12)), whole);
        assert_eq!(PromptText::new(&[], None, 9).text(0..3).split(' ').count(), 4);
    }
}
