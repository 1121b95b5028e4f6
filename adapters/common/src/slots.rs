//! The session's calls by id: the most recent call kept aside, the others
//! in a map. A client that makes its calls one after another (the common
//! agent) then never touches the map: its call is inserted, looked up
//! while it waits and removed with its outcome, each a compare.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use mcpwire::rpc::IdHasher;

/// Values by call id (ids are unique: the connection gives each once).
pub(crate) struct Slots<T> {
    /// The call inserted last, while it lasts.
    recent: Option<(u64, T)>,
    rest: HashMap<u64, T, BuildHasherDefault<IdHasher>>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            recent: None,
            rest: HashMap::default(),
        }
    }
}

impl<T> Slots<T> {
    /// Adds call `id` (a new id).
    pub(crate) fn insert(&mut self, id: u64, value: T) {
        if let Some((before, value)) = self.recent.take() {
            self.rest.insert(before, value);
        }
        self.recent = Some((id, value));
    }

    pub(crate) fn get(&self, id: u64) -> Option<&T> {
        match &self.recent {
            Some((recent, value)) if *recent == id => Some(value),
            _ => self.rest.get(&id),
        }
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        match &mut self.recent {
            Some((recent, value)) if *recent == id => Some(value),
            _ => self.rest.get_mut(&id),
        }
    }

    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        match &self.recent {
            Some((recent, _)) if *recent == id => self.recent.take().map(|(_, value)| value),
            _ => self.rest.remove(&id),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.rest.len() + usize::from(self.recent.is_some())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        let recent = self.recent.iter().map(|(id, value)| (*id, value));
        recent.chain(self.rest.iter().map(|(id, value)| (*id, value)))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.iter().map(|(_, value)| value)
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let recent = self.recent.iter_mut().map(|(_, value)| value);
        recent.chain(self.rest.values_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any sequence of inserts (of new ids), lookups, changes and
        /// removals gives what a plain map gives.
        #[test]
        fn slots_behave_as_a_map(ops in proptest::collection::vec((0u8..5, 0u64..12), 0..200)) {
            let mut slots = Slots::default();
            let mut model = std::collections::BTreeMap::new();
            let mut next = 0u64;
            for (op, pick) in ops {
                // Mostly an id in use, sometimes one that is not.
                let id = model.keys().nth(pick as usize % (model.len() + 1)).copied().unwrap_or(next + pick);
                match op {
                    0 => {
                        slots.insert(next, next * 10);
                        model.insert(next, next * 10);
                        next += 1;
                    }
                    1 => prop_assert_eq!(slots.get(id), model.get(&id)),
                    2 => {
                        if let Some(v) = slots.get_mut(id) {
                            *v += 1;
                        }
                        if let Some(v) = model.get_mut(&id) {
                            *v += 1;
                        }
                    }
                    3 => prop_assert_eq!(slots.remove(id), model.remove(&id)),
                    _ => {
                        for v in slots.values_mut() {
                            *v += 2;
                        }
                        for v in model.values_mut() {
                            *v += 2;
                        }
                    }
                }
                prop_assert_eq!(slots.len(), model.len());
                let mut all: Vec<(u64, u64)> = slots.iter().map(|(id, v)| (id, *v)).collect();
                all.sort_unstable();
                let want: Vec<(u64, u64)> = model.iter().map(|(id, v)| (*id, *v)).collect();
                prop_assert_eq!(all, want);
                prop_assert_eq!(slots.values().count(), model.len());
            }
        }
    }
}
