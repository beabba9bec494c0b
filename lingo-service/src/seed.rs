//! Demo data, written as the upstream pipeline role (`lingo_pipeline`): the catalogue (6
//! languages, 48 everyday phrases in each, every phrase translated into the other 5) and the
//! four analytics tables for `demo-learner` and generic learners `learner-001`, ...
//!
//! Deterministic (a fixed-seed generator and fixed timestamps) and idempotent: every row has a
//! stable key and is upserted only when it differs, so a second run changes nothing.
//!
//! [`seed_demo_sessions`] also gives `demo-learner` three weeks of answered study sessions, so
//! that `GET /me/reviews` has phrases due on a fresh stack. Those are the service's own tables:
//! they are written as the runtime role through the code `POST /me/study-sessions` runs, with
//! times relative to the run (a review schedule needs "now"), once: a learner who has sessions
//! already is left alone.

use chrono::{DateTime, Duration, Utc};
use sqlx::{Connection, PgConnection};

use crate::db;
use crate::domain::fsrs::Grade;
use crate::domain::study_session::{AnswerInput, StudySessionInput};
use crate::store;

pub const DEFAULT_LEARNERS: usize = 20;
pub const DEMO_LEARNER: &str = "demo-learner";
/// Views generated per learner, and recommendations kept per learner.
const VIEWS_PER_LEARNER: usize = 60;
const RECOMMENDATIONS_PER_LEARNER: usize = 25;
/// All seeded analytics happen in the 90 days before this instant.
const SEED_EPOCH: &str = "2026-01-01T00:00:00Z";

pub const LANGUAGES: [(&str, &str); 6] = [
    ("de", "German"),
    ("en", "English"),
    ("es", "Spanish"),
    ("fr", "French"),
    ("it", "Italian"),
    ("pt", "Portuguese"),
];

/// One concept per row, in the order of the language columns: en, es, fr, de, it, pt.
const COLUMNS: [&str; 6] = ["en", "es", "fr", "de", "it", "pt"];
#[rustfmt::skip]
const CONCEPTS: [[&str; 6]; 48] = [
    ["Good morning", "Buenos días", "Bonjour", "Guten Morgen", "Buongiorno", "Bom dia"],
    ["Good evening", "Buenas tardes", "Bonsoir", "Guten Abend", "Buonasera", "Boa tarde"],
    ["Good night", "Buenas noches", "Bonne nuit", "Gute Nacht", "Buonanotte", "Boa noite"],
    ["Hello", "Hola", "Salut", "Hallo", "Ciao", "Olá"],
    ["Goodbye", "Adiós", "Au revoir", "Auf Wiedersehen", "Arrivederci", "Adeus"],
    ["See you tomorrow", "Hasta mañana", "À demain", "Bis morgen", "A domani", "Até amanhã"],
    ["See you later", "Hasta luego", "À plus tard", "Bis später", "A più tardi", "Até logo"],
    ["Please", "Por favor", "S'il vous plaît", "Bitte", "Per favore", "Por favor"],
    ["Thank you", "Gracias", "Merci", "Danke", "Grazie", "Obrigado"],
    ["Thank you very much", "Muchas gracias", "Merci beaucoup", "Vielen Dank", "Grazie mille", "Muito obrigado"],
    ["You're welcome", "De nada", "De rien", "Gern geschehen", "Prego", "De nada"],
    ["Excuse me", "Disculpe", "Excusez-moi", "Entschuldigung", "Mi scusi", "Com licença"],
    ["I'm sorry", "Lo siento", "Je suis désolé", "Es tut mir leid", "Mi dispiace", "Desculpe"],
    ["Yes", "Sí", "Oui", "Ja", "Sì", "Sim"],
    ["No", "No", "Non", "Nein", "No", "Não"],
    ["How are you?", "¿Cómo estás?", "Comment ça va ?", "Wie geht es dir?", "Come stai?", "Como está?"],
    ["I'm fine, thanks", "Estoy bien, gracias", "Je vais bien, merci", "Mir geht es gut, danke", "Sto bene, grazie", "Estou bem, obrigado"],
    ["What is your name?", "¿Cómo te llamas?", "Comment tu t'appelles ?", "Wie heißt du?", "Come ti chiami?", "Como você se chama?"],
    ["My name is Anna", "Me llamo Anna", "Je m'appelle Anna", "Ich heiße Anna", "Mi chiamo Anna", "Meu nome é Anna"],
    ["Nice to meet you", "Mucho gusto", "Enchanté", "Freut mich", "Piacere", "Prazer em conhecê-lo"],
    ["Where are you from?", "¿De dónde eres?", "D'où viens-tu ?", "Woher kommst du?", "Di dove sei?", "De onde você é?"],
    ["I don't understand", "No entiendo", "Je ne comprends pas", "Ich verstehe nicht", "Non capisco", "Não entendo"],
    ["Can you repeat that, please?", "¿Puede repetirlo, por favor?", "Pouvez-vous répéter, s'il vous plaît ?", "Können Sie das bitte wiederholen?", "Può ripetere, per favore?", "Pode repetir, por favor?"],
    ["Do you speak English?", "¿Habla inglés?", "Parlez-vous anglais ?", "Sprechen Sie Englisch?", "Parla inglese?", "Você fala inglês?"],
    ["I speak a little", "Hablo un poco", "Je parle un peu", "Ich spreche ein bisschen", "Parlo un po'", "Falo um pouco"],
    ["Where is the train station?", "¿Dónde está la estación de tren?", "Où est la gare ?", "Wo ist der Bahnhof?", "Dov'è la stazione?", "Onde fica a estação de trem?"],
    ["Where is the bathroom?", "¿Dónde está el baño?", "Où sont les toilettes ?", "Wo ist die Toilette?", "Dov'è il bagno?", "Onde fica o banheiro?"],
    ["Where is the hotel?", "¿Dónde está el hotel?", "Où est l'hôtel ?", "Wo ist das Hotel?", "Dov'è l'albergo?", "Onde fica o hotel?"],
    ["I have a reservation", "Tengo una reserva", "J'ai une réservation", "Ich habe eine Reservierung", "Ho una prenotazione", "Tenho uma reserva"],
    ["How much does it cost?", "¿Cuánto cuesta?", "Combien ça coûte ?", "Wie viel kostet das?", "Quanto costa?", "Quanto custa?"],
    ["The bill, please", "La cuenta, por favor", "L'addition, s'il vous plaît", "Die Rechnung, bitte", "Il conto, per favore", "A conta, por favor"],
    ["A table for two, please", "Una mesa para dos, por favor", "Une table pour deux, s'il vous plaît", "Einen Tisch für zwei, bitte", "Un tavolo per due, per favore", "Uma mesa para dois, por favor"],
    ["I would like a coffee", "Quisiera un café", "Je voudrais un café", "Ich hätte gern einen Kaffee", "Vorrei un caffè", "Eu queria um café"],
    ["A glass of water, please", "Un vaso de agua, por favor", "Un verre d'eau, s'il vous plaît", "Ein Glas Wasser, bitte", "Un bicchiere d'acqua, per favore", "Um copo de água, por favor"],
    ["I am hungry", "Tengo hambre", "J'ai faim", "Ich habe Hunger", "Ho fame", "Estou com fome"],
    ["I am thirsty", "Tengo sed", "J'ai soif", "Ich habe Durst", "Ho sete", "Estou com sede"],
    ["What time is it?", "¿Qué hora es?", "Quelle heure est-il ?", "Wie spät ist es?", "Che ore sono?", "Que horas são?"],
    ["Today is Monday", "Hoy es lunes", "Aujourd'hui, c'est lundi", "Heute ist Montag", "Oggi è lunedì", "Hoje é segunda-feira"],
    ["The weather is nice today", "Hoy hace buen tiempo", "Il fait beau aujourd'hui", "Heute ist schönes Wetter", "Oggi fa bel tempo", "Hoje está um dia bonito"],
    ["It is raining", "Está lloviendo", "Il pleut", "Es regnet", "Sta piovendo", "Está chovendo"],
    ["I love you", "Te quiero", "Je t'aime", "Ich liebe dich", "Ti amo", "Eu te amo"],
    ["Happy birthday!", "¡Feliz cumpleaños!", "Joyeux anniversaire !", "Alles Gute zum Geburtstag!", "Buon compleanno!", "Feliz aniversário!"],
    ["Help!", "¡Ayuda!", "Au secours !", "Hilfe!", "Aiuto!", "Socorro!"],
    ["I need a doctor", "Necesito un médico", "J'ai besoin d'un médecin", "Ich brauche einen Arzt", "Ho bisogno di un medico", "Preciso de um médico"],
    ["Turn left", "Gire a la izquierda", "Tournez à gauche", "Biegen Sie links ab", "Giri a sinistra", "Vire à esquerda"],
    ["Turn right", "Gire a la derecha", "Tournez à droite", "Biegen Sie rechts ab", "Giri a destra", "Vire à direita"],
    ["Straight ahead", "Todo recto", "Tout droit", "Geradeaus", "Sempre dritto", "Em frente"],
    ["I like this book", "Me gusta este libro", "J'aime ce livre", "Ich mag dieses Buch", "Mi piace questo libro", "Eu gosto deste livro"],
];

/// The pipeline's id of the phrase for concept `concept` (0-based) in `language`.
pub fn phrase_id(language: &str, concept: usize) -> String {
    format!("ph-{language}-{:03}", concept + 1)
}

/// SplitMix64: tiny, fixed forever, so the demo data never depends on a library's RNG choice.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound as u64) as usize
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What a seed run wrote (or found already there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedSummary {
    pub languages: usize,
    pub phrases: usize,
    pub translations: usize,
    pub learners: usize,
    pub views: usize,
    pub recommendations: usize,
}

/// Seeds with [`DEFAULT_LEARNERS`] generic learners besides `demo-learner`.
pub async fn seed(pipeline_url: &str) -> anyhow::Result<SeedSummary> {
    seed_with(pipeline_url, DEFAULT_LEARNERS).await
}

/// Seeds the demo data as `lingo_pipeline`, in one transaction.
pub async fn seed_with(pipeline_url: &str, learners: usize) -> anyhow::Result<SeedSummary> {
    let mut connection = db::connect_one(pipeline_url).await?;
    let mut tx = connection.begin().await?;
    let catalogue = seed_catalogue(&mut tx).await?;
    let learner_ids: Vec<String> = std::iter::once(DEMO_LEARNER.to_owned())
        .chain((1..=learners).map(|n| format!("learner-{n:03}")))
        .collect();
    let (views, recommendations) = seed_analytics(&mut tx, &learner_ids).await?;
    tx.commit().await?;
    connection.close().await?;
    Ok(SeedSummary {
        languages: catalogue.0,
        phrases: catalogue.1,
        translations: catalogue.2,
        learners: learner_ids.len(),
        views,
        recommendations,
    })
}

async fn seed_catalogue(tx: &mut PgConnection) -> anyhow::Result<(usize, usize, usize)> {
    let (codes, names): (Vec<&str>, Vec<&str>) = LANGUAGES.iter().copied().unzip();
    store::catalogue::upsert_languages(&mut *tx, &codes, &names).await?;

    let mut ids = Vec::new();
    let mut texts = Vec::new();
    let mut langs = Vec::new();
    let mut t_ids = Vec::new();
    let mut t_langs = Vec::new();
    let mut t_texts = Vec::new();
    for (concept, row) in CONCEPTS.iter().enumerate() {
        for (column, language) in COLUMNS.iter().enumerate() {
            let id = phrase_id(language, concept);
            for (other, other_language) in COLUMNS.iter().enumerate() {
                if other != column {
                    t_ids.push(id.clone());
                    t_langs.push(*other_language);
                    t_texts.push(row[other]);
                }
            }
            ids.push(id);
            texts.push(row[column]);
            langs.push(*language);
        }
    }
    store::catalogue::upsert_phrases(&mut *tx, &ids, &texts, &langs).await?;
    store::catalogue::upsert_translations(&mut *tx, &t_ids, &t_langs, &t_texts).await?;
    Ok((LANGUAGES.len(), ids.len(), t_ids.len()))
}

/// Views and recommendations for each learner, then engagement and the stats cache derived from
/// all views, as the pipeline would.
async fn seed_analytics(
    tx: &mut PgConnection,
    learner_ids: &[String],
) -> anyhow::Result<(usize, usize)> {
    let epoch: DateTime<Utc> = SEED_EPOCH.parse()?;
    let mut views = Views::default();
    let mut recs = Recommendations::default();
    for (index, learner) in learner_ids.iter().enumerate() {
        let mut rng = Rng::new(0x5EED_0000 + index as u64);
        // demo-learner studies Spanish and French; others two languages picked at random.
        let studied: [&str; 2] = if learner == DEMO_LEARNER {
            ["es", "fr"]
        } else {
            let first = rng.below(COLUMNS.len());
            let second = (first + 1 + rng.below(COLUMNS.len() - 1)) % COLUMNS.len();
            [COLUMNS[first], COLUMNS[second]]
        };
        let skill = 0.5 + rng.unit() * 0.45;
        for n in 0..VIEWS_PER_LEARNER {
            let language = studied[rng.below(2)];
            let concept = rng.below(CONCEPTS.len());
            let seconds_before = rng.below(90 * 24 * 3600) as i64;
            views.ids.push(format!("seed-{learner}-{n:04}"));
            views.phrase_ids.push(phrase_id(language, concept));
            views.learner_ids.push(learner.clone());
            views
                .viewed_at
                .push(epoch - Duration::seconds(seconds_before));
            views.correct.push(rng.unit() < skill);
        }
        let mut seen = std::collections::BTreeSet::new();
        while seen.len() < RECOMMENDATIONS_PER_LEARNER {
            let language = studied[rng.below(2)];
            let id = phrase_id(language, rng.below(CONCEPTS.len()));
            if seen.insert(id.clone()) {
                // Four decimals: stable through float formatting, readable in the demo.
                let score = (rng.unit() * 10_000.0).round() / 10_000.0;
                recs.learner_ids.push(learner.clone());
                recs.phrase_ids.push(id);
                recs.scores.push(score);
            }
        }
    }

    let phrase_views = store::analytics::PhraseViews {
        ids: &views.ids,
        phrase_ids: &views.phrase_ids,
        learner_ids: &views.learner_ids,
        viewed_at: &views.viewed_at,
        correct: &views.correct,
    };
    store::analytics::upsert_views(&mut *tx, &phrase_views).await?;

    store::analytics::derive_engagement(&mut *tx).await?;

    store::analytics::derive_stats_cache(&mut *tx).await?;

    store::analytics::upsert_recommendations(
        &mut *tx,
        &recs.learner_ids,
        &recs.phrase_ids,
        &recs.scores,
        epoch,
    )
    .await?;
    Ok((views.ids.len(), recs.phrase_ids.len()))
}

/// Days of demo study sessions before the seed run.
const DEMO_SESSION_DAYS: i64 = 21;
/// The Spanish phrases the demo learner practises.
const DEMO_PHRASES: usize = 30;

/// Records `demo-learner`'s demo study sessions as the runtime role (`app_url`), in one
/// transaction; returns how many were recorded (0 when the learner has sessions already).
pub async fn seed_demo_sessions(app_url: &str) -> anyhow::Result<usize> {
    let mut connection = db::connect_one(app_url).await?;
    let mut tx = connection.begin().await?;
    let existing = store::study_sessions::count_for(&mut *tx, DEMO_LEARNER).await?;
    if existing > 0 {
        return Ok(0);
    }
    let sessions = demo_sessions(Utc::now());
    for (studied_at, input) in &sessions {
        store::study_sessions::record(&mut tx, DEMO_LEARNER, input, *studied_at)
            .await
            .map_err(|error| anyhow::anyhow!("demo session: {error}"))?;
    }
    tx.commit().await?;
    connection.close().await?;
    Ok(sessions.len())
}

/// The demo sessions in time order: most days of the last three weeks, one Spanish session a
/// day with 6 to 14 answers, new phrases early on and reviews of earlier ones later.
fn demo_sessions(now: DateTime<Utc>) -> Vec<(DateTime<Utc>, StudySessionInput)> {
    let mut rng = Rng::new(32);
    let mut sessions = Vec::new();
    for day in (1..=DEMO_SESSION_DAYS).rev() {
        if rng.below(5) == 0 {
            continue; // a day off now and then
        }
        let studied_at = now - Duration::days(day) + Duration::minutes(rng.below(120) as i64);
        let answers: Vec<AnswerInput> = (0..6 + rng.below(9))
            .map(|_| {
                // The phrases introduced so far: the list grows over the weeks.
                let known = (DEMO_PHRASES * (DEMO_SESSION_DAYS + 1 - day) as usize
                    / DEMO_SESSION_DAYS as usize)
                    .max(6);
                let correct = rng.unit() < 0.8;
                let grade = match (correct, rng.below(6)) {
                    (true, 0) => Some(Grade::Hard),
                    (true, 1) => Some(Grade::Easy),
                    _ => None,
                };
                AnswerInput {
                    phrase_id: phrase_id("es", rng.below(known)),
                    correct,
                    grade,
                }
            })
            .collect();
        let correct = answers.iter().filter(|a| a.correct).count() as i64;
        let input = StudySessionInput {
            duration_seconds: 60 * (3 + rng.below(10) as i64),
            phrases_seen: answers.len() as i64,
            phrases_correct: correct,
            language_code: "es".to_owned(),
            answers: Some(answers),
            studied_at: Some(crate::domain::time::rfc3339(&studied_at)),
        };
        sessions.push((studied_at, input));
    }
    sessions
}

#[derive(Default)]
struct Views {
    ids: Vec<String>,
    phrase_ids: Vec<String>,
    learner_ids: Vec<String>,
    viewed_at: Vec<DateTime<Utc>>,
    correct: Vec<bool>,
}

#[derive(Default)]
struct Recommendations {
    learner_ids: Vec<String>,
    phrase_ids: Vec<String>,
    scores: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::study_session::validate;

    #[test]
    fn catalogue_is_big_enough_and_complete() {
        assert!(LANGUAGES.len() >= 5);
        assert!(CONCEPTS.len() * COLUMNS.len() >= 200);
        for row in CONCEPTS {
            assert!(row.iter().all(|text| !text.is_empty()));
        }
        for column in COLUMNS {
            assert!(LANGUAGES.iter().any(|(code, _)| *code == column));
        }
    }

    #[test]
    fn demo_sessions_are_valid_and_in_time_order() {
        let now: DateTime<Utc> = "2026-11-27T12:00:00Z".parse().expect("time");
        let sessions = demo_sessions(now);
        assert!(sessions.len() >= 10, "{}", sessions.len());
        for pair in sessions.windows(2) {
            assert!(pair[0].0 < pair[1].0);
        }
        for (studied_at, input) in &sessions {
            assert!(*studied_at < now && *studied_at > now - Duration::days(30));
            validate(input).expect("valid");
        }
    }

    #[test]
    fn generator_is_fixed() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let first: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        assert_eq!(first, (0..5).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert!((0..1000).map(|_| a.unit()).all(|x| (0.0..1.0).contains(&x)));
    }
}
