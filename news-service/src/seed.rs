//! Deterministic demo data: 20 organisations, 100 journalists and N articles spread over the two
//! years before a fixed date, with news-like titles and bodies whose words follow a long (Zipf)
//! tail, as real news text does (`corpus`). A seeded RNG and a fixed time window make every run
//! produce the same rows, and the upserts leave unchanged rows alone, so a second run changes
//! nothing. Written as the pipeline role, in batches, so a million articles are quick.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Duration, TimeZone, Utc};
use futures_util::{StreamExt, TryStreamExt, stream};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use self::corpus::capitalise;
use crate::db;
use crate::domain::curated::{ArticleRecord, JournalistRecord, OrganizationRecord, UpsertCounts};
use crate::store::curated::{upsert_articles, upsert_journalists, upsert_organizations};

mod corpus;

const SEED: u64 = 0x6e65_7773; // "news"
/// The share of titles about one of the familiar topics (`TOPICS`); the others are about a word
/// of the corpus's long tail.
const TITLE_TOPIC_SHARE: f64 = 0.6;
const BATCH: usize = 5_000;
/// Batches written at once (connections): see `seed`.
const WRITERS: usize = 2;
pub const JOURNALISTS: usize = 100;

const ORGANIZATIONS: [(&str, &str); 20] = [
    ("The Morning Ledger", "morningledger.example"),
    ("Harbor City Herald", "harborcityherald.example"),
    ("Northern Star Tribune", "northernstar.example"),
    ("The Daily Compass", "dailycompass.example"),
    ("Riverside Gazette", "riversidegazette.example"),
    ("Capital Wire", "capitalwire.example"),
    ("Pacific Coast Chronicle", "pacificchronicle.example"),
    ("The Evening Standard Post", "eveningpost.example"),
    ("Metro Report", "metroreport.example"),
    ("Valley Courier", "valleycourier.example"),
    ("Global Affairs Review", "globalaffairs.example"),
    ("The Tech Dispatch", "techdispatch.example"),
    ("Green Planet Journal", "greenplanet.example"),
    ("Market Watchtower", "marketwatchtower.example"),
    ("Health & Science Weekly", "healthscienceweekly.example"),
    ("Sports Central", "sportscentral.example"),
    ("Culture Quarterly", "culturequarterly.example"),
    ("The Civic Observer", "civicobserver.example"),
    ("Lakeside Sentinel", "lakesidesentinel.example"),
    ("Frontier Times", "frontiertimes.example"),
];

const FIRST_NAMES: [&str; 40] = [
    "Amelia", "Ben", "Carla", "Dmitri", "Elena", "Farah", "Gabriel", "Hana", "Isaac", "Julia",
    "Kofi", "Lena", "Marco", "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Samir", "Tessa",
    "Umar", "Vera", "William", "Xiu", "Yusuf", "Zoe", "Aiko", "Bruno", "Chloe", "Diego", "Esther",
    "Felix", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Luis", "Maya", "Noah",
];
const LAST_NAMES: [&str; 40] = [
    "Abbott",
    "Bauer",
    "Castillo",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quinn",
    "Rossi",
    "Silva",
    "Tanaka",
    "Ueda",
    "Varga",
    "Weber",
    "Xu",
    "Yilmaz",
    "Zimmermann",
    "Alvarez",
    "Brennan",
    "Chen",
    "Delgado",
    "Evans",
    "Fontaine",
    "Gupta",
    "Hoffman",
    "Ibrahim",
    "Jovanovic",
    "Kim",
    "Larsen",
    "Mendes",
    "Novak",
];

const TOPICS: [&str; 24] = [
    "housing",
    "public transit",
    "renewable energy",
    "water rates",
    "school funding",
    "hospital waiting times",
    "broadband access",
    "the city budget",
    "air quality",
    "tourism",
    "small business loans",
    "electric buses",
    "flood defences",
    "rent control",
    "youth sports",
    "the local election",
    "artificial intelligence",
    "farm subsidies",
    "bike lanes",
    "the tax reform",
    "remote work",
    "data privacy",
    "food prices",
    "the jobs market",
];
const TEMPLATES: [&str; 20] = [
    "{place} council approves new plan for {topic}",
    "How {topic} is reshaping life in {place}",
    "{n} things to know about the new {topic} rules",
    "Inside the race to fix {place}'s {topic} problem",
    "Residents of {place} divided over {topic}",
    "Opinion: {place} cannot afford to ignore {topic}",
    "What the vote on {topic} means for {place}",
    "Researchers in {place} report progress on {topic}",
    "{topic_cap} costs rise for the {n}th month in a row",
    "Mayor of {place} promises action on {topic}",
    "Explainer: the debate over {topic}, in {n} charts",
    "Local businesses in {place} weigh in on {topic}",
    "A new report puts {topic} at the top of {place}'s agenda",
    "Why {topic} matters more than ever",
    "{place} schools prepare for changes to {topic}",
    "Critics question the cost of {place}'s {topic} push",
    "The people behind {place}'s {topic} turnaround",
    "Five years on, {topic} still divides {place}",
    "Analysis: {topic} and the road ahead for {place}",
    "Live updates: {place} responds to {topic} decision",
];

/// Every fifth article is in Spanish (`language` `es`), so that stemming shows in both
/// languages on a fresh stack: `elecciones` finds `elección`. Same lengths as the English
/// lists, so an article draws the same random numbers in either language.
const SPANISH_EVERY: u64 = 5;
const TOPICS_ES: [&str; 24] = [
    "la vivienda",
    "el transporte público",
    "la energía renovable",
    "las tarifas del agua",
    "la financiación escolar",
    "las listas de espera del hospital",
    "el acceso a internet",
    "el presupuesto municipal",
    "la calidad del aire",
    "el turismo",
    "los préstamos a pequeñas empresas",
    "los autobuses eléctricos",
    "las defensas contra inundaciones",
    "el control de alquileres",
    "el deporte juvenil",
    "las elecciones municipales",
    "la inteligencia artificial",
    "las ayudas agrícolas",
    "los carriles bici",
    "la reforma fiscal",
    "el teletrabajo",
    "la privacidad de los datos",
    "los precios de los alimentos",
    "el mercado laboral",
];
const TEMPLATES_ES: [&str; 20] = [
    "El ayuntamiento de {place} aprueba un plan para {topic}",
    "Cómo {topic} está cambiando la vida en {place}",
    "{n} claves sobre las nuevas normas de {topic}",
    "La carrera para resolver {topic} en {place}",
    "Los vecinos de {place}, divididos sobre {topic}",
    "Opinión: {place} no puede ignorar {topic}",
    "Qué significa la votación sobre {topic} para {place}",
    "Investigadores de {place} avanzan en {topic}",
    "{topic_cap}: los costes suben por {n}º mes consecutivo",
    "La alcaldesa de {place} promete actuar sobre {topic}",
    "Explicación: el debate sobre {topic}, en {n} gráficos",
    "Los comercios de {place} opinan sobre {topic}",
    "Un informe sitúa {topic} en el centro de la agenda de {place}",
    "Por qué {topic} importa más que nunca",
    "Los colegios de {place} se preparan para cambios en {topic}",
    "Críticas al coste de la apuesta de {place} por {topic}",
    "Las personas detrás del giro de {place} en {topic}",
    "Cinco años después, {topic} sigue dividiendo a {place}",
    "Análisis: {topic} y el camino de {place}",
    "Última hora: {place} responde a la decisión sobre {topic}",
];

/// The demo organisations: `org-001` .. `org-020`.
pub fn organizations() -> Vec<OrganizationRecord> {
    ORGANIZATIONS
        .iter()
        .enumerate()
        .map(|(i, (name, host))| OrganizationRecord {
            id: format!("org-{:03}", i + 1),
            name: (*name).to_owned(),
            url: format!("https://{host}"),
        })
        .collect()
}

/// The demo journalists `jrn-0001` .. `jrn-0100`, five per organisation, with distinct names.
pub fn journalists() -> Vec<JournalistRecord> {
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut names: Vec<(usize, usize)> = (0..FIRST_NAMES.len())
        .flat_map(|f| (0..LAST_NAMES.len()).map(move |l| (f, l)))
        .collect();
    names.shuffle(&mut rng);
    names
        .into_iter()
        .take(JOURNALISTS)
        .enumerate()
        .map(|(i, (f, l))| JournalistRecord {
            id: format!("jrn-{:04}", i + 1),
            name: format!("{} {}", FIRST_NAMES[f], LAST_NAMES[l]),
            organization_id: format!("org-{:03}", i % ORGANIZATIONS.len() + 1),
        })
        .collect()
}

/// The end of the two-year window; fixed so that runs agree.
fn window_end() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
}

/// Article number `n` (1-based). Each article has its own RNG stream, so any batch can be made
/// on its own and the result does not depend on the batch size.
pub fn article(n: u64, journalists: &[JournalistRecord]) -> ArticleRecord {
    let mut rng = StdRng::seed_from_u64(SEED ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let journalist = &journalists[rng.gen_range(0..journalists.len())];
    let spanish = n.is_multiple_of(SPANISH_EVERY);
    let corpus = corpus::corpus();
    let language = corpus.language(spanish);
    let (topics, templates) = if spanish {
        (&TOPICS_ES, &TEMPLATES_ES)
    } else {
        (&TOPICS, &TEMPLATES)
    };
    let place = language.places.pick(&mut rng).to_owned();
    // Most titles are about a familiar topic; the rest about a word of the long tail.
    let topic = if rng.gen_bool(TITLE_TOPIC_SHARE) {
        topics[rng.gen_range(0..topics.len())].to_owned()
    } else {
        language.nouns.pick(&mut rng).to_owned()
    };
    let number = rng.gen_range(3..=12).to_string();
    let title = templates[rng.gen_range(0..templates.len())]
        .replace("{place}", &place)
        .replace("{topic_cap}", &capitalise(&topic))
        .replace("{topic}", &topic)
        .replace("{n}", &number);
    let title = capitalise(&title);
    // Whole minutes over two years: ties in published_at happen, as they do in real feeds.
    let minutes = rng.gen_range(0..2 * 365 * 24 * 60);
    let published_at = window_end() - Duration::minutes(minutes);
    let id = format!("art-{n:06}");
    let summary = language
        .summary
        .replace("{journalist}", &journalist.name)
        .replace("{topic}", &topic)
        .replace("{place}", &place);
    let body = corpus::body(corpus, language, &summary, &mut rng);
    ArticleRecord {
        url: format!("https://news.example/articles/{id}"),
        id,
        title,
        summary,
        body,
        published_at,
        organization_id: journalist.organization_id.clone(),
        journalist_id: journalist.id.clone(),
        language: if spanish { "es" } else { "en" }.to_owned(),
    }
}

#[derive(Debug, Clone, Default)]
pub struct SeedSummary {
    pub organizations: UpsertCounts,
    pub journalists: UpsertCounts,
    pub articles: UpsertCounts,
    pub elapsed_secs: f64,
}

impl fmt::Display for SeedSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seeded in {:.1}s: organizations {}; journalists {}; articles {}",
            self.elapsed_secs, self.organizations, self.journalists, self.articles
        )
    }
}

/// Seeds the demo data as the pipeline role (`news_pipeline`).
pub async fn seed(pipeline_url: &str, articles: u64) -> anyhow::Result<SeedSummary> {
    let started = Instant::now();
    let pool = db::connect(pipeline_url, WRITERS as u32, "news-service-seed").await?;
    let mut summary = SeedSummary {
        organizations: upsert_organizations(&pool, &organizations()).await?,
        ..SeedSummary::default()
    };
    let journalists = Arc::new(journalists());
    summary.journalists = upsert_journalists(&pool, &journalists).await?;
    // Most of a batch's cost is PostgreSQL's (the trigger parses and stems the text): WRITERS
    // batches are written at once, each on its own connection, so that the server uses more than
    // one core, while the next batches are generated (on blocking threads) meanwhile.
    let generated = stream::iter((1..=articles).step_by(BATCH))
        .map(|first| {
            let journalists = journalists.clone();
            let last = (first + BATCH as u64 - 1).min(articles);
            tokio::task::spawn_blocking(move || {
                (first..=last)
                    .map(|n| article(n, &journalists))
                    .collect::<Vec<ArticleRecord>>()
            })
        })
        .buffered(WRITERS);
    let pool_ref = &pool;
    let mut written = generated
        .map(|batch| async move { anyhow::Ok(upsert_articles(pool_ref, &batch?).await?) })
        .buffer_unordered(WRITERS);
    let mut done = 0;
    while let Some(counts) = written.try_next().await? {
        let before = done;
        done += counts.inserted + counts.updated + counts.unchanged;
        summary.articles.add(counts);
        if done / 100_000 > before / 100_000 {
            tracing::info!(seeded = done, of = articles, "seeding articles");
        }
    }
    drop(written);
    pool.close().await;
    summary.elapsed_secs = started.elapsed().as_secs_f64();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_well_formed() {
        let journalists = journalists();
        assert_eq!(journalists.len(), JOURNALISTS);
        assert_eq!(journalists, super::journalists());
        let mut names: Vec<_> = journalists.iter().map(|j| j.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), JOURNALISTS, "journalist names are distinct");
        assert_eq!(organizations().len(), 20);
        let a = article(42, &journalists);
        assert_eq!(a, article(42, &journalists));
        assert_eq!(a.id, "art-000042");
        assert!(!a.title.contains('{'), "{}", a.title);
        assert!(a.published_at <= window_end());
        assert!(a.published_at > window_end() - Duration::days(731));
        assert_eq!(a.language, "en");
        let spanish = article(45, &journalists);
        assert_eq!(spanish.language, "es");
        assert!(!spanish.title.contains('{'), "{}", spanish.title);
        let owner = journalists
            .iter()
            .find(|j| j.id == a.journalist_id)
            .map(|j| &j.organization_id);
        assert_eq!(owner, Some(&a.organization_id));
    }

    /// Document frequency of each lower-cased word in the first `n` articles.
    fn document_frequencies(n: u64) -> std::collections::HashMap<String, u64> {
        let journalists = journalists();
        let mut frequencies = std::collections::HashMap::new();
        for a in (1..=n).map(|i| article(i, &journalists)) {
            let text = format!("{} {} {}", a.title, a.summary, a.body).to_lowercase();
            let mut words: Vec<&str> = text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect();
            words.sort_unstable();
            words.dedup();
            for word in words {
                *frequencies.entry(word.to_owned()).or_insert(0) += 1;
            }
        }
        frequencies
    }

    #[test]
    fn words_have_a_frequent_head_and_a_long_tail_of_rare_words() {
        let n = 5_000;
        let frequencies = document_frequencies(n);
        // Words a bench can count on: a frequent one, and rare ones for a selective query.
        let share = |word: &str| frequencies.get(word).copied().unwrap_or(0) as f64 / n as f64;
        assert!(
            share("officials") > 0.15,
            "officials: {}",
            share("officials")
        );
        let rare = frequencies.values().filter(|&&f| f <= n / 1000).count();
        assert!(
            frequencies.len() > 15_000 && rare > 10_000,
            "{} distinct words, {rare} in at most 0.1% of articles",
            frequencies.len()
        );
        assert!(
            share("elecciones") > 0.0 && share("elección") > 0.0,
            "Spanish stemming examples"
        );
    }

    #[test]
    fn bodies_vary_in_length_around_a_median_of_600_characters() {
        let journalists = journalists();
        let mut lengths: Vec<usize> = (1..=2_000)
            .map(|n| article(n, &journalists).body.chars().count())
            .collect();
        lengths.sort_unstable();
        let (shortest, median, longest) = (lengths[0], lengths[1_000], lengths[1_999]);
        assert!(shortest >= 280 && longest <= 3_000, "{shortest}..{longest}");
        assert!((500..=750).contains(&median), "median {median}");
        assert!(
            lengths[1_980] > 1_500,
            "the longest 1% are long: {}",
            lengths[1_980]
        );
    }
}
