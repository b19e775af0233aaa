//! Lexical ranking for `route`: a small BM25 index over weighted fields, with its own
//! tokeniser (lowercase alphanumeric runs, English stop words, a light suffix stemmer) and
//! a calibrated confidence. Written here rather than pulled in: the whole thing is a few
//! hundred lines and the Python supervisor must be able to match it.

use std::collections::HashMap;

/// Term-frequency saturation.
const K1: f64 = 1.2;
/// Length normalisation.
const B: f64 = 0.75;

/// Splits `text` into lowercase alphanumeric tokens, drops stop words and one-letter
/// words, and stems the rest.
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() > 1 || w.chars().all(|c| c.is_numeric()))
        .filter(|w| STOP_WORDS.binary_search(&w.as_str()).is_err())
        .map(|w| stem(&w))
        .collect()
}

/// A light English suffix stemmer: folds plurals, `-ing`, `-ed`, `-ation` and a final `e`
/// so that e.g. `routing`/`route`/`routes` and `migration`/`migrate` meet. Words of three
/// characters or fewer, and non-ASCII words, are left alone.
pub fn stem(word: &str) -> String {
    if !word.is_ascii() || word.len() <= 3 {
        return word.to_owned();
    }
    let mut w = word.to_owned();
    if let Some(base) = w.strip_suffix("ies").filter(|b| b.len() >= 2) {
        w = format!("{base}y");
    } else if w.ends_with("sses") {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w.truncate(w.len() - 1);
    }
    let mut stripped = false;
    for (suffix, replacement) in [("ation", "at"), ("ing", ""), ("ied", "y"), ("ed", "")] {
        if let Some(base) = w.strip_suffix(suffix)
            && base.len() >= 3
            && base.contains(['a', 'e', 'i', 'o', 'u', 'y'])
        {
            w = format!("{base}{replacement}");
            stripped = true;
            break;
        }
    }
    // planned/planning -> plan, but keep `ll`, `ss`, `ff`, `zz` (billing, staffing).
    let bytes = w.as_bytes();
    if stripped
        && bytes.len() >= 4
        && bytes[bytes.len() - 1] == bytes[bytes.len() - 2]
        && !b"lsfzaeiou".contains(&bytes[bytes.len() - 1])
    {
        w.truncate(w.len() - 1);
    }
    if w.len() >= 4 && w.ends_with('e') {
        w.truncate(w.len() - 1);
    }
    w
}

/// A BM25 index over documents made of weighted fields.
#[derive(Debug, Default)]
pub struct Index {
    /// Per document: term -> weighted frequency.
    docs: Vec<HashMap<String, f64>>,
    /// Per document: weighted length.
    lengths: Vec<f64>,
    /// Term -> number of documents containing it.
    df: HashMap<String, usize>,
    avg_len: f64,
}

impl Index {
    /// Builds the index; each document is a list of (text, weight) fields.
    pub fn build(documents: &[Vec<(String, f64)>]) -> Index {
        let mut index = Index::default();
        for fields in documents {
            let mut tf: HashMap<String, f64> = HashMap::new();
            let mut length = 0.0;
            for (text, weight) in fields {
                for token in tokenize(text) {
                    *tf.entry(token).or_default() += weight;
                    length += weight;
                }
            }
            for term in tf.keys() {
                *index.df.entry(term.clone()).or_default() += 1;
            }
            index.docs.push(tf);
            index.lengths.push(length);
        }
        let total: f64 = index.lengths.iter().sum();
        index.avg_len = if index.docs.is_empty() {
            1.0
        } else {
            (total / index.docs.len() as f64).max(f64::MIN_POSITIVE)
        };
        index
    }

    /// BM25 score of every document for `query` (unique query terms, Lucene's
    /// non-negative IDF), in document order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut terms = tokenize(query);
        terms.sort_unstable();
        terms.dedup();
        let n = self.docs.len() as f64;
        let mut scores = vec![0.0; self.docs.len()];
        for term in &terms {
            let Some(&df) = self.df.get(term) else {
                continue;
            };
            let df = df as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (i, doc) in self.docs.iter().enumerate() {
                if let Some(&tf) = doc.get(term) {
                    let norm = K1 * (1.0 - B + B * self.lengths[i] / self.avg_len);
                    scores[i] += idf * tf * (K1 + 1.0) / (tf + norm);
                }
            }
        }
        scores
    }
}

/// How many top scores the dominance term looks at.
pub const TOP_K: usize = 5;
/// Softmax temperature, in BM25 score units: a lead of ~2τ over the runner-up already
/// makes the top pair dominant.
const TEMPERATURE: f64 = 1.5;
/// Scale of the absolute-strength term: a top score of 3σ gives 0.95.
const STRENGTH_SCALE: f64 = 4.0;

/// Calibrated confidence in [0, 1] from scores sorted in descending order.
///
/// `confidence = dominance × strength`, where, with s₁ ≥ s₂ ≥ … the top [`TOP_K`] scores
/// (missing ones count as 0) and τ = [`TEMPERATURE`]:
/// - `dominance = (p₁ − 1/k) / (1 − 1/k)`, p₁ = softmax(sᵢ/τ)₁ = 1 / Σᵢ exp((sᵢ − s₁)/τ):
///   how clearly the winner beats the field, 0 for a k-way tie, → 1 for a clear lead;
/// - `strength = 1 − exp(−s₁/σ)`, σ = [`STRENGTH_SCALE`]: how well the query matches at
///   all, saturating, so one weak shared word cannot look certain.
///
/// Both factors grow with s₁ and shrink as any other sᵢ grows, so the product is monotone
/// in the margin; both lie in [0, 1], and so does the product.
pub fn confidence(sorted_scores: &[f64]) -> f64 {
    let top: Vec<f64> = (0..TOP_K)
        .map(|i| sorted_scores.get(i).copied().unwrap_or(0.0))
        .map(|s| if s.is_finite() { s.max(0.0) } else { 0.0 })
        .collect();
    let s1 = top[0];
    if s1 <= 0.0 {
        return 0.0;
    }
    let denominator: f64 = top
        .iter()
        .map(|s| ((s.min(s1) - s1) / TEMPERATURE).exp())
        .sum();
    let p1 = 1.0 / denominator;
    let k = TOP_K as f64;
    let dominance = ((p1 - 1.0 / k) / (1.0 - 1.0 / k)).clamp(0.0, 1.0);
    let strength = 1.0 - (-s1 / STRENGTH_SCALE).exp();
    (dominance * strength).clamp(0.0, 1.0)
}

/// English stop words, sorted (binary search). Includes request filler ("please",
/// "help") that says nothing about which workflow is meant.
#[rustfmt::skip]
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and",
    "any", "are", "as", "at", "be", "because", "been", "before", "being", "below",
    "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down",
    "during", "each", "few", "for", "from", "further", "get", "had", "has", "have",
    "having", "he", "help", "her", "here", "hers", "herself", "him", "himself", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "me",
    "might", "more", "most", "must", "my", "myself", "no", "nor", "not", "now", "of",
    "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over",
    "own", "please", "same", "shall", "she", "should", "so", "some", "such", "than",
    "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these",
    "they", "this", "those", "through", "to", "too", "under", "until", "up", "us", "very",
    "want", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_word_list_is_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn tokens_are_lowercase_alphanumeric_stemmed_and_free_of_stop_words() {
        assert_eq!(
            tokenize("Architect a NEW payment-routing system for the markets!"),
            ["architect", "new", "payment", "rout", "system", "market"]
        );
        assert_eq!(tokenize("Q3 2024 SOC2, 5 x"), ["q3", "2024", "soc2", "5"]);
        assert!(tokenize("  ...  the of and ").is_empty());
    }

    #[test]
    fn related_word_forms_share_a_stem() {
        for group in [
            &["route", "routes", "routing", "routed"][..],
            &["migration", "migrate", "migrating"],
            &["policy", "policies"],
            &["plan", "planned", "planning", "plans"],
            &["process", "processes", "processing"],
            &["staff", "staffing"],
            &["hire", "hiring", "hired"],
            &["supply", "supplies", "supplied"],
        ] {
            let stems: Vec<String> = group.iter().map(|w| stem(w)).collect();
            assert!(
                stems.windows(2).all(|s| s[0] == s[1]),
                "{group:?} -> {stems:?}"
            );
        }
        assert_eq!(stem("install"), "install");
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("café"), "café");
    }

    fn doc(text: &str) -> Vec<(String, f64)> {
        vec![(text.to_owned(), 1.0)]
    }

    #[test]
    fn bm25_prefers_documents_matching_more_and_rarer_terms() {
        let index = Index::build(&[
            doc("payment routing system design"),
            doc("payment reconciliation"),
            doc("quarterly board report"),
        ]);
        let s = index.scores("design a payment routing system");
        assert!(s[0] > s[1] && s[1] > s[2], "{s:?}");
        assert_eq!(s[2], 0.0);
        assert!(index.scores("zebra").iter().all(|&x| x == 0.0));
    }

    #[test]
    fn field_weights_scale_the_contribution_of_a_term() {
        let index = Index::build(&[
            vec![("audit".into(), 1.0)],
            vec![("audit".into(), 0.3)],
            doc("other"),
        ]);
        let s = index.scores("audit");
        assert!(s[0] > s[1] && s[1] > 0.0, "{s:?}");
    }

    #[test]
    fn an_empty_index_scores_nothing() {
        assert!(Index::build(&[]).scores("anything").is_empty());
    }

    #[test]
    fn confidence_is_bounded_for_any_scores() {
        for scores in [
            vec![],
            vec![0.0; 7],
            vec![f64::NAN, 1.0],
            vec![f64::INFINITY],
            vec![1e300, 1e300],
            vec![-3.0, -4.0],
            vec![50.0],
            vec![0.1, 0.1, 0.1, 0.1, 0.1, 0.1],
        ] {
            let c = confidence(&scores);
            assert!((0.0..=1.0).contains(&c), "{scores:?} -> {c}");
        }
        assert_eq!(confidence(&[]), 0.0);
    }

    #[test]
    fn confidence_grows_with_the_margin_over_the_runner_up() {
        let mut last = -1.0;
        for step in 0..=40 {
            let s1 = 6.0 + f64::from(step) * 0.5;
            let c = confidence(&[s1, 6.0, 5.0, 2.0, 1.0]);
            assert!(c >= last, "not monotone at s1={s1}");
            last = c;
        }
        let mut last = 2.0;
        for step in 0..=20 {
            let s2 = f64::from(step) * 0.5;
            let c = confidence(&[10.0, s2, 0.0]);
            assert!(c <= last, "not monotone at s2={s2}");
            last = c;
        }
    }

    #[test]
    fn confidence_is_high_only_for_a_strong_clear_winner() {
        assert!(confidence(&[20.0, 8.0, 6.0, 5.0, 5.0]) >= 0.8);
        // A tie is never confident, however strong.
        assert!(confidence(&[20.0, 20.0, 19.5]) < 0.4);
        // A clear but weak winner (one common word) is not confident either.
        assert!(confidence(&[1.0, 0.0, 0.0]) < 0.4);
    }
}
