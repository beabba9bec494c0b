//! Values a prepared statement's planner cannot see, so that it keeps one plan.

use sqlx::{Encode, Postgres, QueryBuilder, Type};

/// Pushes `value` as `(SELECT $n)`: an init plan computed once per execution, which an index
/// condition uses like the parameter itself, but whose value the planner does not see.
///
/// sqlx prepares every statement once per connection, and PostgreSQL plans a prepared statement
/// with its values (a custom plan, often dearer to make than to run) until the plan made without
/// them (the generic plan) is estimated no dearer than those. With visible values that choice
/// depends on the values a connection met first (a learner or reader the statistics know as
/// heavy, a journalist with no articles, a bound `LIMIT` read as a tenth of the table), so a list
/// could be planned again at every request. With every value hidden the custom plan is the
/// generic plan: after a connection's first five executions the cache keeps it for every value,
/// and it is one plan chosen on purpose, which the plan tests assert.
pub fn push_opaque<'a, T>(sql: &mut QueryBuilder<'a, Postgres>, value: T)
where
    T: 'a + Encode<'a, Postgres> + Type<Postgres>,
{
    sql.push("(SELECT ").push_bind(value).push(")");
}
