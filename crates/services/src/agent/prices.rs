//! What a dispatch cost when its CLI does not say: its usage at its model's prices, from the built-in
//! table (`config/prices.json`, each provider's published prices, with where they come from) and the
//! settings' `prices`, which add to it and win.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use super::run::Usage;
use crate::config::ModelPrice;

/// The built-in table: provider → `{ "source": where the figures come from, "models": … }`.
pub(crate) const BUILT_IN: &str = include_str!("../../../../config/prices.json");

#[derive(Deserialize)]
struct Provider {
    models: BTreeMap<String, ModelPrice>,
}

/// The built-in prices by model key.
fn built_in() -> &'static BTreeMap<String, ModelPrice> {
    static TABLE: OnceLock<BTreeMap<String, ModelPrice>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let providers: BTreeMap<String, Provider> = serde_json::from_str(BUILT_IN)
            .expect("config/prices.json parses (a unit test reads it)");
        providers
            .into_values()
            .flat_map(|p| p.models)
            .map(|(model, price)| (key(&model), price))
            .collect()
    })
}

/// Prices per model: the built-in table with the settings' entries over it.
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    models: BTreeMap<String, ModelPrice>,
}

impl Default for Prices {
    /// The built-in table alone.
    fn default() -> Self {
        Prices {
            models: built_in().clone(),
        }
    }
}

impl Prices {
    /// The built-in table with `overrides` (the settings' `prices`) added and winning.
    pub fn new(overrides: &BTreeMap<String, ModelPrice>) -> Prices {
        let mut prices = Prices::default();
        for (model, price) in overrides {
            prices.models.insert(key(model), price.clone());
        }
        prices
    }

    /// The prices of `model` as a CLI or a role file names it: `claude-sonnet-4-5`,
    /// `anthropic/claude-sonnet-4-5`, `claude-sonnet-4-5-20250929`, `gpt-5.1` or `gpt-5-1`.
    pub fn of(&self, model: &str) -> Option<&ModelPrice> {
        let name = key(model);
        self.models
            .get(&name)
            .or_else(|| self.models.get(without_version_date(&name)?))
    }

    /// `usage` at the prices of `model`, in US dollars; `None` for a model the table does not know.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        let p = self.of(model)?;
        let tokens = |n: u64, per_million: f64| n as f64 * per_million / 1_000_000.0;
        Some(
            tokens(usage.input, p.input)
                + tokens(usage.output, p.output)
                + tokens(usage.cache_read, p.cache_read.unwrap_or(p.input))
                + tokens(usage.cache_write, p.cache_write.unwrap_or(p.input)),
        )
    }
}

/// A model name as the table is keyed: lower case, without a `provider/` prefix, dots as dashes.
fn key(model: &str) -> String {
    let name = model.trim().rsplit('/').next().unwrap_or_default();
    name.to_ascii_lowercase().replace('.', "-")
}

/// `claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`, `gpt-4o-2024-08-06` → `gpt-4o`,
/// `claude-3-5-haiku-latest` → `claude-3-5-haiku`: a dated or `-latest` snapshot of a model is
/// priced as the model. Nothing else is stripped (`gpt-5-nano` is not `gpt-5`).
fn without_version_date(name: &str) -> Option<&str> {
    if let Some(base) = name.strip_suffix("-latest") {
        return Some(base);
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (base, last) = name.rsplit_once('-')?;
    if last.len() == 8 && digits(last) {
        return Some(base);
    }
    // -YYYY-MM-DD
    let mut parts = name.rsplitn(4, '-');
    let (day, month, year, base) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (day.len() == 2
        && month.len() == 2
        && year.len() == 4
        && digits(day)
        && digits(month)
        && digits(year))
    .then_some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
        Usage {
            input,
            output,
            cache_read,
            cache_write,
            ..Usage::default()
        }
        .with_computed_total()
    }

    #[test]
    fn the_built_in_table_parses_and_says_where_each_figure_comes_from() {
        let doc: serde_json::Value = serde_json::from_str(BUILT_IN).unwrap();
        let providers = doc.as_object().unwrap();
        assert!(providers.contains_key("anthropic") && providers.contains_key("openai"));
        for (name, provider) in providers {
            let source = provider["source"].as_str().unwrap_or_default();
            assert!(
                source.contains("https://"),
                "{name} names its source: {source}"
            );
            let models = provider["models"].as_object().unwrap();
            assert!(!models.is_empty(), "{name}");
            for (model, price) in models {
                for rate in [
                    "inputPerMTok",
                    "outputPerMTok",
                    "cacheReadPerMTok",
                    "cacheWritePerMTok",
                ] {
                    let r = price[rate].as_f64();
                    assert!(r.is_some_and(|r| r > 0.0), "{name} {model} {rate}");
                }
            }
        }
        assert!(built_in().len() > 15);
    }

    #[test]
    fn usage_is_priced_part_by_part() {
        let p = Prices::default();
        // Sonnet 4.5: $3 in, $15 out, $0.30 cache reads, $3.75 cache writes per million.
        let u = usage(1_000_000, 100_000, 2_000_000, 400_000);
        let cost = p.cost("claude-sonnet-4-5", &u).unwrap();
        assert!((cost - (3.0 + 1.5 + 0.6 + 1.5)).abs() < 1e-9, "{cost}");
        assert_eq!(
            p.cost("anthropic/claude-sonnet-4-5-20250929", &u),
            Some(cost)
        );
        assert_eq!(p.cost("Claude-Sonnet-4.5", &u), Some(cost));
        assert_eq!(p.cost("claude-sonnet-4-5-latest", &u), Some(cost));
        assert_eq!(p.cost("unknown-model", &u), None);
        // Only a date (or -latest) comes off: a model of another size keeps its own name.
        assert!(p.of("gpt-5-nano").is_some());
        assert_eq!(p.of("gpt-5-pro"), None);
        assert_eq!(p.of("claude-sonnet-4-5-v2"), None);
        assert!(p.of("gpt-4o-2024-08-06").is_some());
        assert!(p.of("openai/gpt-5.1-codex").is_some());
    }

    #[test]
    fn the_settings_add_models_and_win() {
        let mut overrides = BTreeMap::new();
        overrides.insert(
            "claude-sonnet-4-5".to_string(),
            ModelPrice {
                input: 1.0,
                output: 2.0,
                cache_read: None,
                cache_write: Some(4.0),
            },
        );
        overrides.insert(
            "my-gateway/local-model".to_string(),
            ModelPrice {
                input: 0.5,
                output: 0.5,
                cache_read: None,
                cache_write: None,
            },
        );
        let p = Prices::new(&overrides);
        let u = usage(1_000_000, 1_000_000, 1_000_000, 1_000_000);
        // Cache reads at the input price when the entry names none.
        assert_eq!(p.cost("claude-sonnet-4-5", &u), Some(1.0 + 2.0 + 1.0 + 4.0));
        assert_eq!(p.cost("local-model", &u), Some(2.0));
        assert!(p.of("gpt-5").is_some(), "the built-in rest stays");
    }
}
