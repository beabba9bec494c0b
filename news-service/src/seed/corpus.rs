//! The seed's article text, shaped like real news text for search: a few common words that are in
//! most articles and a long (Zipf) tail of rare ones. Real news text has that tail (people,
//! places, organisations, numbers, topic words), and it is what makes a specific query select
//! few articles through short posting lists.
//!
//! Each language has a vocabulary of about 30,000 words: a head of real words, then made-up words
//! built from the language's syllables. A word of rank `r` is drawn with weight `1/(r + 3)`, so
//! the first words are in a quarter or more of the articles and a word of rank 10,000 in one or two
//! articles in 10,000. People and places are drawn the same way from lists of thousands.
//! Sentences are templates with those words in their slots, so the text still reads as news.
//!
//! Everything here is built from fixed seeds once per process ([`corpus`]), so the same article
//! number always gets the same text.

use std::collections::HashSet;
use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Made-up words per language after the real ones.
const MADE_UP_WORDS: usize = 30_000;
/// Made-up surnames after the real ones, shared by both languages.
const MADE_UP_SURNAMES: usize = 5_000;
/// Made-up place names after the real ones.
const MADE_UP_PLACES: usize = 2_000;
/// Bodies: a median of about 600 characters (what the seed wrote before the long tail), from
/// 300 to 3,000 (a log-normal length, cut at both ends).
/// Zipf-Mandelbrot offsets (see [`Ranked`]): the commonest noun is in about a quarter of the
/// articles, the commonest place and surname in a few percent.
const NOUN_OFFSET: f64 = 3.0;
const PLACE_OFFSET: f64 = 10.0;
const SURNAME_OFFSET: f64 = 20.0;
const BODY_MEDIAN: f64 = 600.0;
const BODY_SPREAD: f64 = 0.6;
const BODY_MIN: usize = 300;
const BODY_MAX: usize = 3_000;

/// Words drawn with weight `1/(rank + offset)` (Zipf-Mandelbrot): the first is the most
/// frequent; the offset flattens the head, so that the commonest place is not in every article.
pub struct Ranked {
    words: Vec<String>,
    /// Cumulative weights: `cumulative[i]` is the sum of the weights of ranks `0..=i`.
    cumulative: Vec<f64>,
}

impl Ranked {
    fn new(words: Vec<String>, offset: f64) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=words.len())
            .map(|rank| {
                total += 1.0 / (rank as f64 + offset);
                total
            })
            .collect();
        Ranked { words, cumulative }
    }

    pub fn pick(&self, rng: &mut StdRng) -> &str {
        let total = self.cumulative.last().copied().unwrap_or_default();
        let u = rng.gen_range(0.0..total);
        let i = self.cumulative.partition_point(|&c| c <= u);
        &self.words[i.min(self.words.len() - 1)]
    }
}

/// One language's text material.
pub struct Language {
    /// Nouns and topic words: real ones first, then made-up ones.
    pub nouns: Ranked,
    pub adjectives: Ranked,
    pub places: Ranked,
    pub organisation_kinds: Ranked,
    pub roles: Ranked,
    pub days: &'static [&'static str],
    pub months: &'static [&'static str],
    pub sentences: &'static [&'static str],
    /// `{journalist}`, `{topic}` and `{place}`.
    pub summary: &'static str,
    pub million: &'static str,
    pub decimal_point: char,
}

pub struct Corpus {
    pub en: Language,
    pub es: Language,
    pub first_names: Ranked,
    pub surnames: Ranked,
}

/// The corpus, built on first use.
pub fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(Corpus::build)
}

impl Corpus {
    fn build() -> Corpus {
        let mut rng = StdRng::seed_from_u64(0x636f_7270_7573); // "corpus"
        let surnames = with_made_up(
            words(LAST_NAMES),
            MADE_UP_SURNAMES,
            &mut rng,
            &NAME_SYLLABLES,
            true,
            SURNAME_OFFSET,
        );
        let place_suffixes = [
            "ford", "field", "haven", "port", "bury", "wick", "mouth", "dale", "ton", "moor",
        ];
        let mut place_names = words(PLACES);
        let mut seen: HashSet<String> = place_names.iter().cloned().collect();
        while place_names.len() < PLACES.split('|').count() + MADE_UP_PLACES {
            let syllables = 1 + rng.gen_range(0..2);
            let stem = made_up(&mut rng, &NAME_SYLLABLES, syllables);
            let name = capitalise(&format!(
                "{stem}{}",
                place_suffixes[rng.gen_range(0..place_suffixes.len())]
            ));
            if seen.insert(name.clone()) {
                place_names.push(name);
            }
        }
        let places_es: Vec<String> = place_names
            .iter()
            .map(|p| spanish_place(p).unwrap_or(p).to_owned())
            .collect();
        Corpus {
            en: Language {
                nouns: with_made_up(
                    words(NOUNS_EN),
                    MADE_UP_WORDS,
                    &mut rng,
                    &EN_SYLLABLES,
                    false,
                    NOUN_OFFSET,
                ),
                adjectives: Ranked::new(words(ADJECTIVES_EN), 3.0),
                places: Ranked::new(place_names, PLACE_OFFSET),
                organisation_kinds: Ranked::new(words(ORGANISATIONS_EN), 2.0),
                roles: Ranked::new(words(ROLES_EN), 2.0),
                days: &DAYS_EN,
                months: &MONTHS_EN,
                sentences: &SENTENCES_EN,
                summary: "{journalist} reports on {topic} in {place}: what changed, who is affected, and what comes next.",
                million: "million",
                decimal_point: '.',
            },
            es: Language {
                nouns: with_made_up(
                    words(NOUNS_ES),
                    MADE_UP_WORDS,
                    &mut rng,
                    &ES_SYLLABLES,
                    false,
                    NOUN_OFFSET,
                ),
                adjectives: Ranked::new(words(ADJECTIVES_ES), 3.0),
                places: Ranked::new(places_es, PLACE_OFFSET),
                organisation_kinds: Ranked::new(words(ORGANISATIONS_ES), 2.0),
                roles: Ranked::new(words(ROLES_ES), 2.0),
                days: &DAYS_ES,
                months: &MONTHS_ES,
                sentences: &SENTENCES_ES,
                summary: "{journalist} informa sobre {topic} en {place}: qué cambió, a quién afecta y qué viene después.",
                million: "millones",
                decimal_point: ',',
            },
            first_names: Ranked::new(words(FIRST_NAMES), 5.0),
            surnames,
        }
    }

    pub fn language(&self, spanish: bool) -> &Language {
        if spanish { &self.es } else { &self.en }
    }

    /// A person's name: first names and surnames drawn on their own, so full names are rare.
    pub fn person(&self, rng: &mut StdRng) -> String {
        format!("{} {}", self.first_names.pick(rng), self.surnames.pick(rng))
    }
}

/// The body: the summary, then paragraphs of template sentences until a drawn length.
pub fn body(corpus: &Corpus, language: &Language, summary: &str, rng: &mut StdRng) -> String {
    // Box-Muller: a standard normal draw for the log-normal length.
    let (u1, u2): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen_range(0.0..1.0));
    let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    let target = ((BODY_MEDIAN * (BODY_SPREAD * normal).exp()) as usize).clamp(BODY_MIN, BODY_MAX);
    let mut body = String::with_capacity(target + 200);
    body.push_str(summary);
    let mut in_paragraph = 3;
    while body.len() < target {
        let sentence = sentence(corpus, language, rng);
        if body.len() + sentence.len() + 2 > BODY_MAX {
            break;
        }
        if in_paragraph == 3 {
            body.push_str("\n\n");
            in_paragraph = 0;
        } else {
            body.push(' ');
        }
        body.push_str(&sentence);
        in_paragraph += 1;
    }
    body
}

/// One template sentence with its slots filled.
fn sentence(corpus: &Corpus, language: &Language, rng: &mut StdRng) -> String {
    let template = language.sentences[rng.gen_range(0..language.sentences.len())];
    let mut out = String::with_capacity(template.len() + 60);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open + rest[open..].find('}').unwrap_or(0);
        let slot = &rest[open + 1..close];
        match slot {
            "noun" => out.push_str(language.nouns.pick(rng)),
            "adj" => out.push_str(language.adjectives.pick(rng)),
            "place" => out.push_str(language.places.pick(rng)),
            "person" => out.push_str(&corpus.person(rng)),
            "role" => out.push_str(language.roles.pick(rng)),
            "org" => {
                // "the Ashford Water Authority" / "la Autoridad del Agua de Ashford"
                let kind = language.organisation_kinds.pick(rng);
                let place = language.places.pick(rng);
                out.push_str(&kind.replace('@', place));
            }
            "day" => out.push_str(language.days[rng.gen_range(0..language.days.len())]),
            "month" => out.push_str(language.months[rng.gen_range(0..language.months.len())]),
            "dom" => out.push_str(&rng.gen_range(1..=28).to_string()),
            "year" => out.push_str(&rng.gen_range(1990..=2025).to_string()),
            "small" => out.push_str(&rng.gen_range(2..=12).to_string()),
            "pct" => {
                let (whole, tenths) = (rng.gen_range(1..=60), rng.gen_range(0..10));
                out.push_str(&format!("{whole}{}{tenths}%", language.decimal_point));
            }
            "money" => {
                let (whole, tenths) = (rng.gen_range(1..=950), rng.gen_range(0..10));
                let million = language.million;
                out.push_str(&format!(
                    "{whole}{}{tenths} {million}",
                    language.decimal_point
                ));
            }
            "count" => {
                let n: u32 = rng.gen_range(120..=98_000);
                out.push_str(&group_thousands(n));
            }
            other => out.push_str(other),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    capitalise(&out)
}

fn group_thousands(n: u32) -> String {
    if n >= 1000 {
        format!("{},{:03}", n / 1000, n % 1000)
    } else {
        n.to_string()
    }
}

pub fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn words(list: &str) -> Vec<String> {
    list.split('|')
        .map(|w| w.trim().to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

struct Syllables {
    onsets: &'static [&'static str],
    vowels: &'static [&'static str],
    codas: &'static [&'static str],
    suffixes: &'static [&'static str],
}

fn made_up(rng: &mut StdRng, s: &Syllables, syllables: usize) -> String {
    let mut word = String::new();
    for _ in 0..syllables {
        word.push_str(s.onsets[rng.gen_range(0..s.onsets.len())]);
        word.push_str(s.vowels[rng.gen_range(0..s.vowels.len())]);
        word.push_str(s.codas[rng.gen_range(0..s.codas.len())]);
    }
    word
}

/// `head` followed by `count` distinct made-up words (two or three syllables and a suffix).
fn with_made_up(
    head: Vec<String>,
    count: usize,
    rng: &mut StdRng,
    syllables: &Syllables,
    capitalised: bool,
    offset: f64,
) -> Ranked {
    let mut seen: HashSet<String> = head.iter().map(|w| w.to_lowercase()).collect();
    let mut list = head;
    let target = list.len() + count;
    while list.len() < target {
        let length = 2 + usize::from(rng.gen_bool(0.3));
        let mut word = made_up(rng, syllables, length);
        word.push_str(syllables.suffixes[rng.gen_range(0..syllables.suffixes.len())]);
        if word.len() >= 5 && seen.insert(word.clone()) {
            list.push(if capitalised { capitalise(&word) } else { word });
        }
    }
    Ranked::new(list, offset)
}

fn spanish_place(english: &str) -> Option<&'static str> {
    Some(match english {
        "the capital" => "la capital",
        "the northern valley" => "el valle del norte",
        "the coast" => "la costa",
        "the old town" => "el casco antiguo",
        "the suburbs" => "las afueras",
        _ => return None,
    })
}

const EN_SYLLABLES: Syllables = Syllables {
    onsets: &[
        "b", "br", "c", "cl", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n", "p",
        "pl", "pr", "r", "s", "sh", "st", "t", "tr", "v", "w",
    ],
    vowels: &["a", "e", "i", "o", "u", "a", "e", "o", "ea", "ou"],
    codas: &["", "", "", "n", "r", "l", "st", "nd", "m", "ck", "ng"],
    suffixes: &[
        "", "", "er", "ing", "ment", "ton", "ity", "ance", "ure", "ism", "ade", "ness",
    ],
};
const ES_SYLLABLES: Syllables = Syllables {
    onsets: &[
        "b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "br", "tr", "pl", "ch",
        "ll", "j", "z",
    ],
    vowels: &["a", "e", "i", "o", "u", "ia", "ue", "ío", "á", "é"],
    codas: &["", "", "", "n", "r", "l", "s"],
    suffixes: &[
        "", "", "ción", "miento", "dad", "era", "ismo", "ario", "ería", "eño",
    ],
};
const NAME_SYLLABLES: Syllables = Syllables {
    onsets: &[
        "b", "br", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
        "ch", "st",
    ],
    vowels: &["a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei"],
    codas: &["", "", "", "n", "r", "l", "s", "nd", "k", "m"],
    suffixes: &[
        "", "", "son", "er", "ez", "ova", "ski", "ani", "ard", "elli", "sen", "dottir", "ic",
    ],
};

const FIRST_NAMES: &str = "James|Maria|Ana|David|Sarah|Carlos|Laura|Michael|Sofia|John|Elena|Daniel|Emma|Luis|Anna|Peter|Lucia|Thomas|Olivia|Jorge|Amelia|Ben|Carla|Dmitri|Farah|Gabriel|Hana|Isaac|Julia|Kofi|Lena|Marco|Nadia|Oscar|Priya|Quentin|Rosa|Samir|Tessa|Umar|Vera|William|Xiu|Yusuf|Zoe|Aiko|Bruno|Chloe|Diego|Esther|Felix|Grace|Hugo|Ines|Jonas|Kira|Maya|Noah|Fatima|Mohammed|Wei|Yuki|Arjun|Aisha|Pablo|Carmen|Javier|Isabel|Miguel|Paula|Andrea|Raul|Teresa|Alberto|Marta|Sergio|Pilar|Rafael|Beatriz|Hector|Nora|Ethan|Chen|Ravi|Leila|Omar|Tomas|Ingrid|Sven|Astrid|Lars|Mei|Kenji|Amara|Chidi|Ngozi|Tariq|Zara|Mateo|Valentina|Ivan|Olga|Pierre|Claire|Antoine|Giulia|Matteo|Katarzyna|Piotr|Agnieszka|Erik|Helena|Robert|Susan|Karen|Mark|Paul|Linda|George|Rachel|Simon|Alice|Frank|Joan|Henry|Ruth|Victor|Irene|Adam|Eva|Samuel|Martha|Leon|Sara|Nikolai|Dana|Kwame|Abena|Sione|Mele|Tane|Aroha|Dev|Anjali|Sunil|Meera";
const LAST_NAMES: &str = "Smith|Garcia|Johnson|Rodriguez|Brown|Martinez|Lopez|Wilson|Gonzalez|Taylor|Hernandez|Moore|Perez|Anderson|Sanchez|Thomas|Ramirez|Jackson|Torres|White|Flores|Harris|Rivera|Clark|Gomez|Lewis|Diaz|Walker|Reyes|Hall|Morales|Young|Ortiz|King|Gutierrez|Wright|Ruiz|Scott|Alvarez|Green|Castillo|Baker|Jimenez|Adams|Moreno|Nelson|Romero|Hill|Herrera|Campbell|Medina|Mitchell|Aguilar|Roberts|Vargas|Carter|Guzman|Phillips|Mendoza|Abbott|Bauer|Dubois|Eriksen|Fischer|Haddad|Ito|Jensen|Kowalski|Lindqvist|Moreau|Nakamura|Okafor|Petrov|Quinn|Rossi|Silva|Tanaka|Ueda|Varga|Weber|Xu|Yilmaz|Zimmermann|Brennan|Chen|Delgado|Evans|Fontaine|Gupta|Hoffman|Ibrahim|Jovanovic|Kim|Larsen|Mendes|Novak";
const PLACES: &str = "Harbor City|Riverside|the capital|Lakeside|the northern valley|Port Ellis|Brookfield|the coast|Eastgate|Millbrook|the old town|Westmoor|Cedar Falls|Kingsport|the suburbs|Ashford|Northbridge|Stonehaven|Fairmount|Oakridge|Greenwich Bay|Silverton|Redcliff|Maple Grove|Southport|Highland Park|Bayview|Elmstead|Granite Springs|Willow Creek";
const NOUNS_EN: &str = "council|government|city|plan|report|minister|police|court|school|market|company|price|election|vote|budget|tax|water|energy|housing|road|bridge|hospital|health|workers|union|strike|harbour|port|ferry|train|station|airport|flight|storm|flood|fire|drought|farm|harvest|festival|museum|team|match|season|coach|player|league|bank|rate|inflation|debt|loan|factory|plant|mine|river|park|forest|beach|coast|island|village|district|neighbourhood|community|residents|families|children|students|teachers|doctors|nurses|patients|visitors|tourists|drivers|passengers|owners|tenants|landlords|investors|shareholders|regulators|lawmakers|voters|candidates|campaign|protest|agreement|contract|deal|proposal|law|rule|inquiry|investigation|trial|verdict|appeal|decision|project|programme|scheme|service|network|software|data|study|research|survey|policy|reform|strategy|crisis|shortage|surplus|deficit|funding|grant|subsidy|permit|licence|ban|fine|fee|wage|pension|benefit|rent|mortgage|transit|buses|tram|cycling|pollution|emissions|recycling|waste|sewage|drainage|wildfire|heatwave|vaccine|clinic|surgery|library|theatre|concert|exhibition|stadium|tournament|championship|referee|transfer|startup|merger|layoffs|exports|imports|tariffs|shipping|warehouse|retail|tourism|hotel|restaurant|bakery|brewery|vineyard|fishery|orchard|dairy|cattle|grain|fertiliser|pesticide|satellite|telescope|laboratory|battery|charger|turbine|pipeline|refinery|reactor|grid|outage|broadband|cyberattack|privacy|algorithm|robot|drone|smartphone|elections|ministers|councillors|officials|judges|prosecutors|lawyers|witnesses|suspects|victims|volunteers|refugees|migrants|pensioners|commuters|cyclists|pedestrians|fishermen|farmers|miners|dockers|pilots|engineers|scientists|economists|historians|architects|artists|musicians|athletes";
const NOUNS_ES: &str = "ayuntamiento|gobierno|ciudad|plan|informe|ministro|policía|tribunal|escuela|mercado|empresa|precio|elecciones|votación|presupuesto|impuesto|agua|energía|vivienda|carretera|puente|hospital|salud|trabajadores|sindicato|huelga|puerto|ferri|tren|estación|aeropuerto|vuelo|tormenta|inundación|incendio|sequía|granja|cosecha|festival|museo|equipo|partido|temporada|entrenador|jugador|liga|banco|inflación|deuda|préstamo|fábrica|planta|mina|río|parque|bosque|playa|costa|isla|pueblo|distrito|barrio|comunidad|vecinos|familias|niños|estudiantes|profesores|médicos|enfermeras|pacientes|visitantes|turistas|conductores|pasajeros|propietarios|inquilinos|inversores|reguladores|diputados|votantes|candidatos|campaña|protesta|acuerdo|contrato|propuesta|ley|norma|investigación|juicio|sentencia|recurso|decisión|proyecto|programa|servicio|red|sistema|datos|estudio|encuesta|política|reforma|estrategia|crisis|escasez|financiación|subvención|permiso|licencia|prohibición|multa|tasa|salario|pensión|alquiler|hipoteca|autobuses|tranvía|contaminación|emisiones|reciclaje|residuos|vacuna|clínica|biblioteca|teatro|concierto|exposición|estadio|torneo|campeonato|fichaje|fusión|despidos|exportaciones|importaciones|aranceles|turismo|hotel|restaurante|panadería|viñedo|pesca|ganado|cereal|satélite|laboratorio|batería|turbina|refinería|apagón|ciberataque|privacidad|algoritmo|dron|elección|concejales|funcionarios|jueces|fiscales|abogados|testigos|víctimas|voluntarios|refugiados|pensionistas|agricultores|mineros|pilotos|ingenieros|científicos|economistas|arquitectos|artistas|músicos|atletas";
const ADJECTIVES_EN: &str = "new|local|public|national|regional|major|key|final|early|late|long|short|rural|urban|private|central|northern|southern|coastal|annual|record|emergency|temporary|controversial|delayed|planned|proposed|revised|ambitious|costly|cheaper|safer|greener|historic|independent|critical|fragile|disputed|unexpected";
const ADJECTIVES_ES: &str = "nuevo|local|público|nacional|regional|principal|clave|definitivo|largo|breve|rural|urbano|privado|central|anual|récord|temporal|polémico|previsto|revisado|ambicioso|costoso|histórico|independiente|crítico|frágil|inesperado|urgente|provisional|pendiente";
const ORGANISATIONS_EN: &str = "@ City Council|@ Water Authority|@ Transit Agency|@ Chamber of Commerce|@ Teachers' Union|@ Hospital Trust|@ Port Authority|@ Housing Association|@ Farmers' Cooperative|University of @|@ Police Department|@ Fire Service|@ Energy Company|@ Football Club|@ Historical Society|@ Business Forum|@ Tenants' Union|@ Arts Council";
const ORGANISATIONS_ES: &str = "Ayuntamiento de @|Autoridad del Agua de @|Consorcio de Transportes de @|Cámara de Comercio de @|Sindicato de Docentes de @|Hospital General de @|Autoridad Portuaria de @|Asociación de Vecinos de @|Cooperativa Agrícola de @|Universidad de @|Policía Local de @|Bomberos de @|Compañía Eléctrica de @|Club de Fútbol @|Sociedad Histórica de @|Foro Empresarial de @|Sindicato de Inquilinos de @";
const ROLES_EN: &str = "a spokesperson|the director|a senior official|the chair|a researcher|the mayor|a councillor|the chief executive|an economist|the head of planning|a union leader|a local resident|the treasurer|a lawyer";
const ROLES_ES: &str = "portavoz|directora|alto cargo|presidente|investigadora|alcaldesa|concejal|consejero delegado|economista|jefa de urbanismo|líder sindical|vecino|tesorera|abogado";
const DAYS_EN: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const DAYS_ES: [&str; 7] = [
    "lunes",
    "martes",
    "miércoles",
    "jueves",
    "viernes",
    "sábado",
    "domingo",
];
const MONTHS_EN: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const MONTHS_ES: [&str; 12] = [
    "enero",
    "febrero",
    "marzo",
    "abril",
    "mayo",
    "junio",
    "julio",
    "agosto",
    "septiembre",
    "octubre",
    "noviembre",
    "diciembre",
];
const SENTENCES_EN: [&str; 16] = [
    "Officials in {place} said on {day} that decisions on the {noun} would be taken within weeks.",
    "{person}, {role} at the {org}, said the {noun} had cost {money} more than expected.",
    "The {org} has asked for {money} in new funding for {noun} and {noun}.",
    "Residents of {place} described the {noun} as the issue that shapes their daily lives most.",
    "A {adj} report on {noun} in {place} found that {pct} of households were affected.",
    "Critics, among them {person} of the {org}, warned that the {adj} {noun} would take years.",
    "Talks between the {org} and the {org} over {noun} resumed on {day}.",
    "{person} told reporters that {noun} remained the most {adj} concern for {place}.",
    "Since {year}, spending on {noun} in {place} has risen by {pct}.",
    "The {adj} {noun} will be discussed at a meeting in {place} on {month} {dom}.",
    "Supporters of the {noun} proposal, led by {person}, gathered outside the offices of the {org}.",
    "Experts cautioned that the numbers on {noun} are still moving and that {small} separate proposals are on the table.",
    "According to {person}, the future of {noun} in {place} depends on {noun} and {noun}.",
    "The vote on {noun} is expected in {month}, {person}, {role}, said.",
    "About {count} people in {place} signed a petition against the {adj} {noun}.",
    "This story will be updated as the {org} publishes its figures on {noun}.",
];
const SENTENCES_ES: [&str; 16] = [
    "Las autoridades de {place} dijeron el {day} que las decisiones sobre {noun} se tomarán en las próximas semanas.",
    "{person}, {role} de {org}, dijo que {noun} había costado {money} más de lo previsto.",
    "{org} ha pedido {money} de financiación nueva para {noun} y {noun}.",
    "Los vecinos de {place} describieron {noun} como la cuestión que más marca su vida diaria.",
    "Un informe {adj} sobre {noun} en {place} concluye que el {pct} de los hogares está afectado.",
    "Los críticos, entre ellos {person}, de {org}, advirtieron de que {noun} llevará años.",
    "Las negociaciones entre {org} y {org} sobre {noun} se reanudaron el {day}.",
    "{person} dijo a la prensa que {noun} sigue siendo la mayor preocupación de {place}.",
    "Desde {year}, el gasto en {noun} en {place} ha subido un {pct}.",
    "El plan {adj} de {noun} se debatirá en una reunión en {place} el {dom} de {month}.",
    "Los partidarios de la propuesta sobre {noun}, encabezados por {person}, se concentraron ante la sede de {org}.",
    "Los expertos advirtieron de que las cifras de {noun} todavía cambian y de que hay {small} propuestas distintas sobre la mesa.",
    "Según {person}, el futuro de {noun} en {place} depende de {noun} y de {noun}.",
    "La votación sobre {noun} se espera para {month}, según {person}, {role}.",
    "Unas {count} personas de {place} firmaron una petición contra {noun}.",
    "Esta noticia se actualizará cuando {org} publique sus cifras sobre {noun}.",
];
