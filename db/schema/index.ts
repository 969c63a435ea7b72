/** Every table and enum of the state store: drizzle-kit's schema entry and the typed `db` schema. */
export * from './enums';
export * from './fleets';
export * from './domains';
export * from './slots';
export * from './operations';
export * from './events';
export * from './watch-workers';
export * from './training-jobs';
