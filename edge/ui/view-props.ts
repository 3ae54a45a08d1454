/** Props every view gets: the route's path segments after the view's own name. */
export interface ViewProps {
  args: string[];
}
