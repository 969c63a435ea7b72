CREATE TABLE "watch_workers" (
	"id" text PRIMARY KEY NOT NULL,
	"task_queue" text NOT NULL,
	"own_queue" text NOT NULL,
	"shards" integer NOT NULL,
	"held" integer NOT NULL,
	"seen_at" timestamp with time zone NOT NULL
);
