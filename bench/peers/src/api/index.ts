import { Hono } from "hono"; // Ponder requires an API; the bench reads the tables instead

export default new Hono();
